/**
 * How the respondent page ends: thanks with the privacy spent (and the current results
 * when the survey shows them at the end), the survey having closed, or a failure to retry.
 */
import { fmtSignificant, h } from "/static/dom.js";
import { PrivrankError } from "/static/privrank.js";
import { central, client, main, show, state } from "/static/respond-state.js";
import { resultsContent } from "/static/results-view.js";

export async function thanks() {
  const { survey } = state;
  let me = null;
  try {
    me = await client.me();
  } catch {
    /* the summary is optional */
  }
  const pairs = (n) => `${n} ${n === 1 ? "pair" : "pairs"}`;
  show(
    h("h2", { id: "thanks" }, "Thank you!"),
    me
      ? h(
          "p",
          { id: "spent" },
          survey.kind === "ranking"
            ? `Your ranking was sent randomized. Privacy spent: ε = ${fmtSignificant(me.epsilon_total)} for moving one item, ` +
                `ε = ${fmtSignificant((me.epsilon_total * survey.n_items) / 2)} between any two rankings.`
            : central()
              ? `You answered ${pairs(me.comparisons)}.`
              : `You answered ${pairs(me.comparisons)}. Your total privacy spent is ε = ${fmtSignificant(me.epsilon_total)} (the sum over your answers).`,
        )
      : null,
    h(
      "p",
      { class: "hint" },
      central()
        ? "Only differentially private summaries of the answers are ever published."
        : "Every answer was randomized on this device before it was sent.",
    ),
  );
  main.querySelector("#thanks").setAttribute("tabindex", "-1");
  main.querySelector("#thanks").focus();
  if (survey.results_on_finish) await finishResults();
}

/** The survey's current results under the thanks (surveys with results_on_finish). */
async function finishResults() {
  let r;
  try {
    r = await client.results();
  } catch {
    return; // the results are a bonus: the thanks stand without them
  }
  const link = `/r/${encodeURIComponent(client.surveyId)}`;
  main.append(
    h(
      "section",
      { id: "finish-results", "aria-labelledby": "finish-results-h" },
      h("h3", { id: "finish-results-h" }, "The results so far"),
      ...resultsContent(r, { level: 4, idPrefix: "finish-results" }),
      h(
        "p",
        {},
        h("a", { href: link, id: "results-link" }, "The results page"),
        " (it updates as answers come in).",
      ),
    ),
  );
}

export function failure(err) {
  if (err instanceof PrivrankError && err.status === 409 && /closed/.test(err.message)) {
    show(
      h("h2", { id: "closed", tabindex: "-1" }, "This survey has closed"),
      h("p", {}, "Your earlier answers were received. Thank you!"),
    );
    main.querySelector("#closed").focus();
    return;
  }
  // "Try again" resends the same randomized report (privrank.js remembers it): a retry
  // never draws a new randomization of the same true answer.
  show(
    h("p", { class: "error", role: "alert", id: "failure" }, `Something went wrong: ${err.message}`),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "button", id: "try-again", onclick: () => state.start() }, "Try again"),
    ),
  );
  main.querySelector("#try-again").focus();
}
