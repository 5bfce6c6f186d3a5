/**
 * The respondent page, /s/{survey_id}: explains the privacy in plain words, lets the
 * respondent choose ε within the survey's bounds, then asks one pair at a time (or
 * a drag-to-order ranking), randomizing every answer on this device before it is
 * sent (privrank.js, privatized: true). Finishes with the total privacy spent.
 *
 * The views: respond-intro.js, respond-pairs.js, respond-ranking.js, respond-end.js;
 * what they share is in respond-state.js.
 *
 * The page's language is the one the service chose for it (GET …/public: ?lang=, then
 * Accept-Language, then the survey's default); its text comes from the "respond" catalogs
 * (i18n.js) and the item labels from the service in that language.
 */
import { h } from "/static/dom.js";
import { languageFooter, loadCatalogs, preferredLanguage, t } from "/static/i18n.js";
import { intro } from "/static/respond-intro.js";
import { nextPair } from "/static/respond-pairs.js";
import { rankingView } from "/static/respond-ranking.js";
import { client, show, state } from "/static/respond-state.js";

/** The page's fixed text (respond.html) in the page's language. */
function translatePage() {
  document.querySelector(".skip-link").textContent = t("page.skip");
  document.getElementById("survey-name").textContent = t("page.survey");
}

async function start() {
  try {
    state.survey = await client.survey();
  } catch (err) {
    // Without the service's choice (no such survey): ?lang=, then the browser's languages.
    await loadCatalogs(["respond", "results"], preferredLanguage(client.lang));
    translatePage();
    show(
      h("p", { class: "error", role: "alert" }, err.status === 404 ? t("start.no_such_survey") : err.message),
    );
    return;
  }
  const { survey } = state;
  client.lang = survey.language; // the labels of pairs, rankings and results in the page's language
  await loadCatalogs(["respond", "results"], survey.language); // results: at the end, if shown
  translatePage();
  document.getElementById("languages")?.remove();
  document.body.append(languageFooter(survey.languages, survey.language, t("page.languages")));
  document.getElementById("survey-name").textContent = survey.title;
  document.title = t("page.title", { title: survey.title });
  if (survey.status !== "open") {
    show(
      ...(survey.goal_met
        ? [h("h2", { id: "closed" }, t("closed.goal.title")), h("p", {}, t("closed.goal.text"))]
        : [h("h2", { id: "closed" }, t("closed.title")), h("p", {}, t("closed.text"))]),
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
