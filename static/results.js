/**
 * The public results page, /r/{survey_id}: a survey's current ranking for its
 * participants and anyone else, without credentials, when the survey publishes its
 * results (public_results); a plain message when it does not. The content is drawn by
 * results-view.js (shared with the end of the respondent page), in the language the
 * service chose (?lang=, then Accept-Language, then the survey's default; the labels too).
 */
import { h } from "/static/dom.js";
import {
  LANGUAGES,
  languageFooter,
  loadCatalogs,
  preferredLanguage,
  t,
  translateStatic,
} from "/static/i18n.js";
import { PrivrankClient } from "/static/privrank.js";
import { resultsContent } from "/static/results-view.js";

const main = document.getElementById("results");
const surveyId = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "");

const lang = new URLSearchParams(location.search).get("lang");

async function start() {
  let r;
  try {
    r = await new PrivrankClient({ surveyId, lang }).results();
  } catch (err) {
    await loadCatalogs(["results"], preferredLanguage(lang));
    translateStatic(document);
    main.replaceChildren(
      ...(err.status === 404
        ? [
            h("h2", { id: "not-public" }, t("results.not_public.title")),
            h("p", {}, t("results.not_public.text")),
          ]
        : [
            h(
              "p",
              { class: "error", role: "alert", id: "failure" },
              t("results.failure", { error: err.message }),
            ),
          ]),
    );
    return;
  }
  await loadCatalogs(["results"], r.language);
  translateStatic(document);
  document.getElementById("results-title").textContent = r.title;
  document.title = t("results.page.title", { title: r.title });
  document.body.append(languageFooter(LANGUAGES, r.language, t("results.page.languages")));
  main.replaceChildren(...resultsContent(r, { level: 2, idPrefix: "results" }));
}

start();
