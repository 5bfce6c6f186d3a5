/**
 * Taking part beyond answering, on the respondent page's pair view (surveys with
 * suggestions enabled): "Suggest an idea" (a new item for the moderators; stored without
 * any link to the respondent) and "Report" for an item of the pair shown.
 */
import { announce, h } from "/static/dom.js";
import { t, tn } from "/static/i18n.js";
import { client, state } from "/static/respond-state.js";

let box = null; // the suggestion form, kept across pairs (its text, its open state, its message)

/** Whether this survey takes suggestions and reports from its respondents. */
export const participates = () => Boolean(state.survey?.suggestions?.enabled);

/** The longest idea, in characters (the service's label limit for suggestions). */
const MAX_IDEA = 200;

function thanksText(remaining) {
  const after = state.survey.suggestions.moderation === "after";
  const more = remaining > 0 ? tn("suggest.remaining", remaining) : t("suggest.last");
  const k = state.survey.suggestions.batch;
  return `${t(after ? "suggest.thanks.after" : "suggest.thanks.before", { k })} ${more}`;
}

// A 409 means the survey stopped taking suggestions (closed, or switched off) or this
// respondent used all of theirs (code "suggestion_limit").
const stopped = (err) => err.code !== "suggestion_limit" && /closed|not take|off/i.test(err.message);

/** The "Suggest an idea" box: one per page, the same element under every pair. */
export function suggestBox() {
  if (box) return box;
  const per = state.survey.suggestions.per_respondent;
  const input = h("input", {
    id: "suggest-label",
    type: "text",
    maxlength: MAX_IDEA,
    required: true,
    autocomplete: "off",
    "aria-describedby": "suggest-privacy",
  });
  const send = h("button", { type: "submit", id: "suggest-send" }, t("suggest.send"));
  const message = h("p", { id: "suggest-msg", role: "status" });
  const form = h(
    "form",
    { id: "suggest-form" },
    h(
      "div",
      { class: "field" },
      h("label", { for: "suggest-label" }, t("suggest.label", { max: MAX_IDEA })),
      input,
    ),
    h(
      "p",
      { class: "hint", id: "suggest-privacy" },
      `${tn("suggest.privacy", per)} ${t("suggest.batch", { k: state.survey.suggestions.batch })}`,
    ),
    h("div", { class: "actions" }, send),
    message,
  );
  const done = (text) => {
    input.disabled = true;
    send.disabled = true;
    message.className = "hint";
    message.textContent = text;
  };
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const label = input.value.trim();
    if (!label) return;
    send.disabled = true;
    try {
      const r = await client.suggest(label);
      input.value = "";
      message.className = "ok";
      message.textContent = thanksText(r.remaining);
      announce(message.textContent);
      if (r.remaining > 0) send.disabled = false;
      else done(message.textContent);
    } catch (err) {
      if (err.status === 409 && stopped(err)) {
        done(t("suggest.stopped"));
      } else if (err.status === 409) {
        done(tn("suggest.limit", per));
      } else {
        send.disabled = false;
        message.className = "error";
        message.textContent =
          err.status === 422
            ? t("suggest.invalid", { min: 1, max: MAX_IDEA })
            : t("suggest.failed", { error: err.message });
      }
      announce(message.textContent);
    }
  });
  box = h(
    "details",
    { id: "suggest-box", class: "suggest" },
    h("summary", {}, t("suggest.summary")),
    h("p", { class: "hint" }, t("suggest.intro")),
    form,
  );
  return box;
}

/**
 * The discreet "Report" buttons for the two items of `pair`. Reporting one thanks the
 * respondent, leaves the pair (`next()` shows another) and never shows it again here.
 */
export function reportRow(pair, next) {
  const report = (id, label) => async () => {
    for (const b of document.querySelectorAll(".report button")) b.disabled = true;
    state.skipped.add(`${pair.a}|${pair.b}`);
    try {
      await client.flag(id);
      state.notice = t("report.thanks", { label });
    } catch (err) {
      state.notice = err.status === 409 ? t("report.limit") : t("report.failed", { error: err.message });
    }
    announce(state.notice);
    next();
  };
  return h(
    "p",
    { class: "report", id: "report" },
    h("span", { class: "hint" }, `${t("report.prompt")} `),
    h(
      "button",
      { type: "button", class: "link", id: "report-a", onclick: report(pair.a, pair.a_label) },
      t("report.button", { label: pair.a_label }),
    ),
    h(
      "button",
      { type: "button", class: "link", id: "report-b", onclick: report(pair.b, pair.b_label) },
      t("report.button", { label: pair.b_label }),
    ),
  );
}
