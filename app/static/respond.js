/**
 * The respondent page, /s/{survey_id}: explains the privacy in plain words, lets the
 * respondent choose ε within the survey's bounds, then asks one pair at a time (or
 * a drag-to-order ranking), randomizing every answer on this device before it is
 * sent (privrank.js, privatized: true). Finishes with the total privacy spent.
 *
 * The views: respond-intro.js, respond-pairs.js, respond-ranking.js, respond-end.js;
 * what they share is in respond-state.js.
 */
import { h } from "/static/dom.js";
import { intro } from "/static/respond-intro.js";
import { nextPair } from "/static/respond-pairs.js";
import { rankingView } from "/static/respond-ranking.js";
import { client, show, state } from "/static/respond-state.js";

async function start() {
  try {
    state.survey = await client.survey();
  } catch (err) {
    show(
      h(
        "p",
        { class: "error", role: "alert" },
        err.status === 404 ? "There is no such survey." : err.message,
      ),
    );
    return;
  }
  const { survey } = state;
  document.getElementById("survey-name").textContent = survey.title;
  document.title = `${survey.title} — privrank`;
  if (survey.status !== "open") {
    show(
      ...(survey.goal_met
        ? [
            h("h2", { id: "closed" }, "This survey has its answer"),
            h(
              "p",
              {},
              "It reached its goal with the answers it has, so it asks no more. Thank you for coming!",
            ),
          ]
        : [
            h("h2", { id: "closed" }, "This survey is closed"),
            h("p", {}, "It no longer takes answers. Thank you for your interest."),
          ]),
    );
    return;
  }
  if (client.token) {
    const me = await client.me().catch(() => null);
    if (me) {
      client.epsilon = me.epsilon;
      state.answered = me.comparisons;
      return survey.kind === "ranking" ? rankingView() : nextPair();
    }
  }
  intro();
}

state.start = start;
start();
