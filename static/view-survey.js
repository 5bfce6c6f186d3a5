/**
 * One survey (#/survey/{id}): the heading with its privacy in words, the respondent
 * link, the participation settings and the actions (open/close, export, refresh), then
 * the moderation (surveys taking suggestions), the sections its kind shows, and the
 * items with their source and status. A moderator sees the heading and the moderation only.
 */
import { api, download, showError } from "/static/api.js";
import { announce, h } from "/static/dom.js";
import { t, tn } from "/static/i18n.js";
import { privacySummaryText } from "/static/privacy-summary.js";
import { app, session } from "/static/session.js";
import { centralSections } from "/static/view-survey-central.js";
import { embedSection } from "/static/view-survey-embed.js";
import { hasModeration, itemsSection, moderationSection } from "/static/view-survey-moderation.js";
import { pairwiseSections } from "/static/view-survey-pairwise.js";
import { rankingSurveySections } from "/static/view-survey-ranking.js";

/** The survey's title with its status badge: the heading of every view of a survey. */
function surveyTitle(s) {
  return h(
    "h2",
    { id: "survey-title" },
    s.title,
    " ",
    h("span", { class: `badge ${s.status}`, id: "survey-status" }, t(`status.${s.status}`)),
  );
}

/** A moderator's view of a survey: its heading and its moderation, nothing else. */
async function moderatorView(s) {
  const head = h(
    "section",
    { class: "panel", "aria-labelledby": "survey-title" },
    surveyTitle(s),
    h(
      "p",
      { id: "moderation-summary" },
      s.suggestions?.enabled
        ? tn("survey.moderator_summary.pending", s.pending_suggestions ?? 0, { items: s.items.length })
        : t("survey.moderator_summary", { items: s.items.length }),
    ),
  );
  const body = h("div", { id: "survey-body" });
  app.replaceChildren(head, body);
  if (!hasModeration(s)) {
    body.append(h("p", { class: "hint", id: "no-moderation" }, t("survey.no_suggestions")));
    return;
  }
  const moderation = moderationSection(s);
  body.append(moderation.node);
  await moderation.load();
}

/** A checkbox that PATCHes one setting of the survey, then re-renders the view. */
function settingToggle(s, id, text, patch, checked, { disabled = false, hint = null } = {}) {
  const box = h("input", { type: "checkbox", id, checked, disabled });
  box.addEventListener("change", async () => {
    box.disabled = true;
    try {
      await api("PATCH", `/v1/surveys/${s.id}`, patch(box.checked));
      announce(t(box.checked ? "survey.setting_on" : "survey.setting_off", { setting: text }));
      await session.route();
      document.getElementById(id)?.focus();
    } catch (err) {
      box.checked = !box.checked;
      box.disabled = false;
      showError(document.getElementById("settings-error"), err);
    }
  });
  return h("div", { class: "field" }, h("label", { class: "check" }, box, text), hint);
}

/** Participation settings: suggestions, the public results page and results at the end. */
function participationSettings(s) {
  if (s.public_results === undefined) return null; // a service without participatory surveys
  const resultsLink = `${location.origin}/r/${s.id}`;
  const out = h("div", { id: "participation" });
  if (s.public_results) {
    out.append(
      h(
        "p",
        {},
        t("survey.public_results"),
        " ",
        h("a", { href: resultsLink, class: "mono", id: "public-results-link" }, resultsLink),
      ),
    );
  }
  if (s.suggestions?.enabled) {
    out.append(
      h(
        "p",
        { id: "suggestions-settings" },
        t(`survey.suggestions_settings.${s.suggestions.moderation === "after" ? "after" : "before"}`, {
          per: s.suggestions.per_respondent,
          flags: s.suggestions.flag_threshold,
          batch: s.suggestions.batch,
          pending: s.pending_suggestions ?? 0,
        }),
      ),
    );
  }
  if (session.role !== "admin") return out;
  const fields = h(
    "details",
    { class: "settings", id: "settings" },
    h("summary", {}, t("survey.settings")),
    s.kind === "pairwise"
      ? settingToggle(
          s,
          "toggle-suggestions",
          t("new.suggestions"),
          (on) => ({ suggestions: on ? { ...(s.suggestions ?? {}), enabled: true } : null }),
          Boolean(s.suggestions?.enabled),
        )
      : null,
    settingToggle(
      s,
      "toggle-public-results",
      t("survey.toggle_public", { path: `/r/${s.id}` }),
      (on) => (on ? { public_results: true } : { public_results: false, results_on_finish: false }),
      Boolean(s.public_results),
    ),
    settingToggle(
      s,
      "toggle-results-on-finish",
      t("new.results_on_finish"),
      (on) => ({ results_on_finish: on }),
      Boolean(s.results_on_finish),
      {
        disabled: !s.public_results,
        hint: s.public_results ? null : h("p", { class: "hint" }, t("survey.needs_public")),
      },
    ),
    h("div", { id: "settings-error" }),
  );
  out.append(fields);
  return out;
}

export async function surveyView(id) {
  const s = await api("GET", `/v1/surveys/${encodeURIComponent(id)}`);
  if (session.role === "moderator") return moderatorView(s);
  const link = `${location.origin}/s/${s.id}`;
  const p = s.privacy;
  const head = h(
    "section",
    { class: "panel", "aria-labelledby": "survey-title" },
    surveyTitle(s),
    h(
      "p",
      {},
      t(`survey.describe.${s.kind === "ranking" ? "ranking" : "pairwise"}.${s.privacy.model}`, {
        n: s.items.length,
      }),
    ),
    h(
      "div",
      { class: "privacy-box", id: "privacy-summary" },
      h("h3", {}, t("summary.title")),
      h("p", {}, privacySummaryText(s.privacy.summary)),
    ),
    h(
      "p",
      {},
      t("survey.respondent_link"),
      " ",
      h("a", { href: link, class: "mono", id: "respondent-link" }, link),
    ),
    participationSettings(s),
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
            if (closing && !confirm(t("survey.close_confirm"))) return;
            try {
              await api("PATCH", `/v1/surveys/${s.id}`, { status: closing ? "closed" : "open" });
              announce(t(closing ? "survey.closed" : "survey.reopened"));
              await session.route();
              document.getElementById("toggle-status")?.focus();
            } catch (err) {
              announce(err.message);
              showError(actionError, err);
            }
          },
        },
        t(closing ? "survey.close" : "survey.reopen"),
      ),
    );
  }
  if (p.model === "local") {
    const file = s.kind === "ranking" ? "rankings.csv" : "comparisons.csv";
    const exportCsv = () =>
      download(`/v1/surveys/${s.id}/${file}`, `${s.id}-${file}`).catch((e) => announce(e.message));
    actions.append(
      h(
        "button",
        { type: "button", class: "secondary", id: "export", onclick: exportCsv },
        t("survey.export", { file }),
      ),
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
      t("survey.refresh"),
    ),
  );
  head.append(actions, actionError);
  const body = h("div", { id: "survey-body" });
  app.replaceChildren(head, body);
  let items = s.items.some((it) => it.source !== undefined) ? itemsSection(s) : null;
  // A decision in the moderation changes the items: their table follows.
  const refreshItems = async () => {
    if (!items) return;
    const fresh = itemsSection(await api("GET", `/v1/surveys/${s.id}`));
    items.replaceWith(fresh);
    items = fresh;
  };
  const moderation = session.role === "admin" && hasModeration(s) ? moderationSection(s, refreshItems) : null;
  if (moderation) {
    body.append(moderation.node);
    await moderation.load();
  }
  if (p.model === "central") await centralSections(s, body);
  else if (s.kind === "ranking") await rankingSurveySections(s, body);
  else await pairwiseSections(s, body);
  if (items) body.append(items);
  const embed = embedSection(s, session.role);
  if (embed) body.append(embed);
}
