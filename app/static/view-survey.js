/**
 * One survey (#/survey/{id}): the heading with its privacy in words, the respondent
 * link and the actions (open/close, export, refresh), then the sections its kind shows.
 */
import { api, download, showError } from "/static/api.js";
import { announce, h, pct } from "/static/dom.js";
import { truthProbability } from "/static/privrank.js";
import { app, session } from "/static/session.js";
import { centralSections } from "/static/view-survey-central.js";
import { pairwiseSections } from "/static/view-survey-pairwise.js";
import { rankingSurveySections } from "/static/view-survey-ranking.js";

function privacyText(s) {
  const p = s.privacy;
  const m = s.items.length;
  if (p.model === "central") {
    return `Central model: true answers stored; releases spend a total budget of ε = ${p.total_budget}; each respondent gives at most ${p.max_comparisons_per_respondent} comparisons.`;
  }
  if (s.kind === "ranking") {
    return `Local model: each ranking replaced by a Mallows copy at the respondent's ε in [${p.epsilon_min}, ${p.epsilon_max}] (default ${p.epsilon_default}: adjacent items swapped with probability ${pct(1 / (1 + Math.exp(p.epsilon_default / (m - 1))))}; ε·m/2 = ${(p.epsilon_default * m) / 2} between arbitrary rankings).`;
  }
  return (
    `Local model: each answer randomized with the respondent's ε in [${p.epsilon_min}, ${p.epsilon_max}] (default ${p.epsilon_default}: truthful with probability ${pct(truthProbability(p.epsilon_default))})` +
    (p.respondent_budget ? `; each respondent spends at most ε = ${p.respondent_budget} in all.` : ".")
  );
}

export async function surveyView(id) {
  const s = await api("GET", `/v1/surveys/${encodeURIComponent(id)}`);
  const link = `${location.origin}/s/${s.id}`;
  const p = s.privacy;
  const head = h(
    "section",
    { class: "panel", "aria-labelledby": "survey-title" },
    h(
      "h2",
      { id: "survey-title" },
      s.title,
      " ",
      h("span", { class: `badge ${s.status}`, id: "survey-status" }, s.status),
    ),
    h(
      "p",
      {},
      `${s.kind === "ranking" ? "Ranking question" : "Pairwise questions"} over ${s.items.length} items. ${privacyText(s)}`,
    ),
    h("p", {}, "Respondent link: ", h("a", { href: link, class: "mono", id: "respondent-link" }, link)),
  );
  const actions = h("div", { class: "actions" });
  const actionError = h("div", { id: "action-error" });
  if (session.role === "admin") {
    const closing = s.status === "open";
    actions.append(
      h(
        "button",
        {
          type: "button",
          id: "toggle-status",
          class: closing ? "danger" : null,
          onclick: async () => {
            if (closing && !confirm("Close this survey? New respondents and answers will be refused."))
              return;
            try {
              await api("PATCH", `/v1/surveys/${s.id}`, { status: closing ? "closed" : "open" });
              announce(`Survey ${closing ? "closed" : "reopened"}`);
              await session.route();
              document.getElementById("toggle-status")?.focus();
            } catch (err) {
              announce(err.message);
              showError(actionError, err);
            }
          },
        },
        closing ? "Close survey" : "Reopen survey",
      ),
    );
  }
  if (p.model === "local") {
    const file = s.kind === "ranking" ? "rankings.csv" : "comparisons.csv";
    const exportCsv = () =>
      download(`/v1/surveys/${s.id}/${file}`, `${s.id}-${file}`).catch((e) => announce(e.message));
    actions.append(
      h("button", { type: "button", class: "secondary", id: "export", onclick: exportCsv }, `Export ${file}`),
    );
  }
  actions.append(
    h(
      "button",
      {
        type: "button",
        class: "secondary",
        id: "refresh",
        onclick: async () => {
          await session.route();
          document.getElementById("refresh")?.focus();
        },
      },
      "Refresh",
    ),
  );
  head.append(actions, actionError);
  const body = h("div", { id: "survey-body" });
  app.replaceChildren(head, body);
  if (p.model === "central") await centralSections(s, body);
  else if (s.kind === "ranking") await rankingSurveySections(s, body);
  else await pairwiseSections(s, body);
}
