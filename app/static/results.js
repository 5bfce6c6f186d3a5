/**
 * The public results page, /r/{survey_id}: a survey's current ranking for its
 * participants and anyone else, without credentials, when the survey publishes its
 * results (public_results); a plain message when it does not. The content is drawn by
 * results-view.js (shared with the end of the respondent page).
 */
import { h } from "/static/dom.js";
import { PrivrankClient } from "/static/privrank.js";
import { resultsContent } from "/static/results-view.js";

const main = document.getElementById("results");
const surveyId = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "");

async function start() {
  let r;
  try {
    r = await new PrivrankClient({ surveyId }).results();
  } catch (err) {
    main.replaceChildren(
      ...(err.status === 404
        ? [
            h("h2", { id: "not-public" }, "These results are not public"),
            h(
              "p",
              {},
              "This survey does not publish its results, or there is no survey at this address. " +
                "If you took part, the organizers may share the results another way.",
            ),
          ]
        : [
            h(
              "p",
              { class: "error", role: "alert", id: "failure" },
              `The results could not be loaded: ${err.message}`,
            ),
          ]),
    );
    return;
  }
  document.getElementById("results-title").textContent = r.title;
  document.title = `${r.title} — results`;
  main.replaceChildren(...resultsContent(r, { level: 2, idPrefix: "results" }));
}

start();
