/**
 * The new-survey form (#/new, admins only): items, question, privacy model, a goal and
 * adaptive assignment (local pairwise surveys), participation (suggestions and reports,
 * public results), the respondents' language and the planner.
 */
import { api, showError } from "/static/api.js";
import { announce, h, numberField } from "/static/dom.js";
import { LANGUAGES, languageName, num, percent, t } from "/static/i18n.js";
import { truthProbability } from "/static/privrank.js";
import { app, session } from "/static/session.js";
import { accuracyPreview } from "/static/view-plan.js";

function epsilonMeaning(eps) {
  if (!(eps > 0)) return "";
  return t("new.eps_meaning", {
    eps: num(eps, { maximumFractionDigits: 6 }),
    truth: percent(truthProbability(eps)),
  });
}

export function newSurveyView() {
  if (session.role !== "admin") {
    app.replaceChildren(h("p", { class: "error" }, t("new.admin_only")));
    return;
  }
  const meaning = h("p", { id: "eps-meaning", class: "hint", "aria-live": "polite" }, epsilonMeaning(1));
  const local = h(
    "fieldset",
    { id: "local-fields" },
    h("legend", {}, t("new.local.legend")),
    numberField("eps-default", t("new.eps_default"), 1, { min: 0.001, max: 30 }),
    meaning,
    numberField("eps-min", t("new.eps_min"), 0.1, { min: 0.001, max: 30 }),
    numberField("eps-max", t("new.eps_max"), 2, { min: 0.001, max: 30 }),
    // The service's defaults, filled in: a finite cap unless the admin ticks the opt-out.
    // Ranking surveys take one ranking each: their cap is the largest ε (the service's default).
    h(
      "div",
      { id: "budget-fields" },
      numberField("budget", t("new.budget"), 5, { min: 0.001, max: 100, "aria-describedby": "budget-hint" }),
      h(
        "p",
        { id: "budget-hint", class: "hint" },
        t("new.budget_hint", { guess: percent(truthProbability(5)) }),
      ),
      h(
        "div",
        { class: "field" },
        h(
          "label",
          { class: "check" },
          h("input", { type: "checkbox", id: "budget-unlimited" }),
          t("new.budget_unlimited"),
        ),
      ),
    ),
  );
  const central = h(
    "fieldset",
    { id: "central-fields", hidden: true },
    h("legend", {}, t("new.central.legend")),
    numberField("total-budget", t("new.total_budget"), 3, { min: 0.001, max: 100 }),
    numberField("max-comparisons", t("new.max_comparisons"), 5, { min: 1, step: 1 }),
    h(
      "div",
      { class: "field" },
      h("label", { for: "accounting" }, t("new.accounting")),
      h(
        "select",
        { id: "accounting", "aria-describedby": "accounting-hint" },
        h("option", { value: "pure", selected: true }, t("new.accounting.pure")),
        h("option", { value: "zcdp" }, t("new.accounting.zcdp")),
      ),
      h("p", { id: "accounting-hint", class: "hint" }, t("new.accounting_hint")),
    ),
  );
  const radio = (name, value, text, attrs = {}) =>
    h("label", {}, h("input", { type: "radio", name, value, ...attrs }), text);
  const checkbox = (id, text, attrs = {}) =>
    h(
      "div",
      { class: "field" },
      h("label", { class: "check" }, h("input", { type: "checkbox", id, ...attrs }), text),
    );
  // Local pairwise surveys: what to certify, and how pairs are picked (fixed at creation).
  const goal = h(
    "fieldset",
    { id: "goal-fields" },
    h("legend", {}, t("new.goal.legend")),
    h("p", { class: "hint", id: "goal-hint" }, t("new.goal.hint")),
    h(
      "fieldset",
      {},
      h("legend", {}, t("new.goal.what")),
      h(
        "div",
        { class: "choice-row" },
        radio("goal", "none", t("new.goal.none"), { checked: true }),
        radio("goal", "top_k", t("new.goal.top_k")),
        radio("goal", "full", t("new.goal.full")),
      ),
    ),
    h(
      "div",
      { class: "sub-fields", id: "goal-details" },
      // Required: an empty K would be sent as 0 (disabled, for a whole ranking, it is not checked).
      numberField("goal-k", t("new.goal.k"), 3, { min: 1, step: 1, required: true }),
      h(
        "div",
        { class: "field" },
        h("label", { for: "goal-level" }, t("new.goal.level")),
        h(
          "select",
          { id: "goal-level", "aria-describedby": "goal-level-hint" },
          [0.9, 0.95, 0.99].map((x) => h("option", { value: x, selected: x === 0.95 }, percent(x))),
        ),
        h("p", { class: "hint", id: "goal-level-hint" }, t("new.goal.level_hint")),
      ),
      checkbox("goal-close", t("new.goal.close")),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, t("new.assignment.legend")),
      h(
        "div",
        { class: "choice-row" },
        radio("assignment", "balanced", t("new.assignment.balanced"), { checked: true }),
        radio("assignment", "adaptive", t("new.assignment.adaptive"), { id: "assignment-adaptive" }),
      ),
      h("p", { class: "hint", id: "assignment-hint" }, t("new.assignment.hint")),
    ),
    h(
      "fieldset",
      { id: "certificate-field", "aria-describedby": "certificate-hint" },
      h("legend", {}, t("new.goal.certificate")),
      h(
        "div",
        { class: "choice-column" },
        radio("certificate", "borda", t("new.goal.certificate.borda"), { checked: true }),
        radio("certificate", "pairwise", t("new.goal.certificate.pairwise"), { id: "certificate-pairwise" }),
      ),
      h("p", { class: "hint", id: "certificate-hint" }, t("new.goal.certificate_hint")),
    ),
  );
  const suggestFields = h(
    "div",
    { id: "suggestion-fields", class: "sub-fields", hidden: true },
    numberField("per-respondent", t("new.per_respondent"), 3, { min: 1, max: 20, step: 1 }),
    h(
      "fieldset",
      {},
      h("legend", {}, t("new.moderation")),
      h(
        "div",
        { class: "choice-row" },
        h(
          "label",
          {},
          h("input", { type: "radio", name: "moderation", value: "before", checked: true }),
          t("new.moderation.before"),
        ),
        h(
          "label",
          {},
          h("input", { type: "radio", name: "moderation", value: "after" }),
          t("new.moderation.after"),
        ),
      ),
    ),
    numberField("flag-threshold", t("new.flag_threshold"), 3, { min: 1, max: 100, step: 1 }),
    numberField("batch", t("new.batch"), 5, { min: 2, max: 50, step: 1 }),
    h("p", { class: "hint", id: "batch-hint" }, t("new.batch_hint")),
  );
  const participation = h(
    "fieldset",
    { id: "participation-fields" },
    h("legend", {}, t("new.participation")),
    h(
      "div",
      { id: "suggestion-choice" },
      checkbox("suggestions-enabled", t("new.suggestions")),
      suggestFields,
    ),
    checkbox("public-results", t("new.public_results", { path: "/r/{id}" })),
    checkbox("results-on-finish", t("new.results_on_finish"), { disabled: true }),
  );
  const val = (id) => form.querySelector(`#${id}`).value.trim();
  const items = () =>
    val("items")
      .split("\n")
      .map((s) => s.trim())
      .filter(Boolean);
  // The cap the survey would have: none when opted out; the service's default (the field's
  // initial value) when left empty.
  const budget = () => {
    const field = form.querySelector("#budget");
    if (form.querySelector("#budget-unlimited").checked) return null;
    return Number(field.value === "" ? field.defaultValue : field.value);
  };
  const planner = accuracyPreview(val, items, budget);
  const error = h("div", { id: "create-error" });
  const form = h(
    "form",
    { id: "create-form" },
    h("h2", {}, t("new.title")),
    h(
      "div",
      { class: "field" },
      h("label", { for: "title" }, t("new.field.title")),
      h("input", { id: "title", type: "text", required: true, maxlength: 500 }),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: "items" }, t("new.items")),
      h("textarea", { id: "items", required: true, "aria-describedby": "items-hint" }),
      h("p", { id: "items-hint", class: "hint" }, t("new.items_hint")),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, t("new.question")),
      h(
        "div",
        { class: "choice-row" },
        h(
          "label",
          {},
          h("input", { type: "radio", name: "kind", value: "pairwise", checked: true }),
          t("new.kind.pairwise"),
        ),
        h("label", {}, h("input", { type: "radio", name: "kind", value: "ranking" }), t("new.kind.ranking")),
      ),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, t("new.model")),
      h(
        "div",
        { class: "choice-row" },
        h(
          "label",
          {},
          h("input", { type: "radio", name: "model", value: "local", checked: true }),
          t("new.model.local"),
        ),
        h(
          "label",
          {},
          h("input", { type: "radio", name: "model", value: "central", id: "model-central" }),
          t("new.model.central"),
        ),
      ),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: "language" }, t("new.language")),
      h(
        "select",
        { id: "language", "aria-describedby": "language-hint" },
        LANGUAGES.map((code) => h("option", { value: code, selected: code === "en" }, languageName(code))),
      ),
      h("p", { id: "language-hint", class: "hint" }, t("new.language_hint")),
    ),
    local,
    central,
    goal,
    participation,
    planner,
    h("div", { class: "actions" }, h("button", { type: "submit", id: "create-btn" }, t("new.create"))),
    error,
  );
  const kind = () => form.querySelector('input[name="kind"]:checked').value;
  const model = () => form.querySelector('input[name="model"]:checked').value;
  const sync = () => {
    const isCentral = model() === "central";
    local.hidden = isCentral;
    central.hidden = !isCentral;
    planner.hidden = isCentral || kind() !== "pairwise";
    const ranking = kind() === "ranking";
    form.querySelector("#model-central").disabled = ranking;
    if (ranking && isCentral) form.querySelector('input[name="model"][value="local"]').checked = true;
    // Suggestions are for pairwise surveys; results at the end need published results.
    const suggest = form.querySelector("#suggestions-enabled");
    form.querySelector("#suggestion-choice").hidden = ranking;
    if (ranking) suggest.checked = false;
    suggestFields.hidden = !suggest.checked;
    form.querySelector("#budget-fields").hidden = ranking;
    // A goal and adaptive assignment are for local pairwise surveys; adaptive steers towards
    // a goal, and the pairwise certificate needs adaptive assignment.
    goal.hidden = isCentral || ranking;
    const aim = form.querySelector('input[name="goal"]:checked').value;
    const adaptive = form.querySelector("#assignment-adaptive");
    adaptive.disabled = aim === "none";
    if (adaptive.disabled && adaptive.checked)
      form.querySelector('input[name="assignment"][value="balanced"]').checked = true;
    form.querySelector("#goal-details").hidden = aim === "none";
    form.querySelector("#goal-k").disabled = aim !== "top_k";
    form.querySelector("#goal-k").max = Math.max(1, items().length - 1);
    form.querySelector("#certificate-field").hidden = aim === "none";
    const pairwise = form.querySelector("#certificate-pairwise");
    pairwise.disabled = !adaptive.checked;
    if (pairwise.disabled && pairwise.checked)
      form.querySelector('input[name="certificate"][value="borda"]').checked = true;
    form.querySelector("#budget").disabled = form.querySelector("#budget-unlimited").checked;
    const finish = form.querySelector("#results-on-finish");
    finish.disabled = !form.querySelector("#public-results").checked;
    if (finish.disabled) finish.checked = false;
  };
  form.addEventListener("change", sync);
  form.querySelector("#eps-default").addEventListener("input", (ev) => {
    meaning.textContent = epsilonMeaning(Number(ev.target.value));
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const privacy =
      model() === "central"
        ? {
            model: "central",
            total_budget: Number(val("total-budget")),
            max_comparisons_per_respondent: Number(val("max-comparisons")),
            accounting: val("accounting"),
          }
        : {
            model: "local",
            epsilon_default: Number(val("eps-default")),
            epsilon_min: Number(val("eps-min")),
            epsilon_max: Number(val("eps-max")),
            // An empty cap (or a ranking survey) is the service's default cap; no cap is only
            // ever the explicit opt-out.
            respondent_budget:
              kind() === "ranking"
                ? null
                : form.querySelector("#budget-unlimited").checked
                  ? "unlimited"
                  : val("budget") === ""
                    ? null
                    : Number(val("budget")),
          };
    const body = { title: val("title"), kind: kind(), items: items(), privacy, language: val("language") };
    // Participation settings only when chosen (the defaults are the API's own).
    if (form.querySelector("#suggestions-enabled").checked) {
      body.suggestions = {
        enabled: true,
        per_respondent: Number(val("per-respondent")),
        moderation: form.querySelector('input[name="moderation"]:checked').value,
        flag_threshold: Number(val("flag-threshold")),
        batch: Number(val("batch")),
      };
    }
    if (model() === "local" && kind() === "pairwise") {
      body.assignment = form.querySelector('input[name="assignment"]:checked').value;
      const aim = form.querySelector('input[name="goal"]:checked').value;
      if (aim !== "none") {
        body.goal = {
          ...(aim === "top_k" ? { top_k: Number(val("goal-k")) } : { full_ranking: true }),
          level: Number(val("goal-level")),
          close_when_met: form.querySelector("#goal-close").checked,
          certificate: form.querySelector('input[name="certificate"]:checked').value,
        };
      }
    }
    if (form.querySelector("#public-results").checked) body.public_results = true;
    if (form.querySelector("#results-on-finish").checked) body.results_on_finish = true;
    try {
      const s = await api("POST", "/v1/surveys", body);
      announce(t("new.created", { title: s.title }));
      location.hash = `#/survey/${s.id}`;
    } catch (err) {
      showError(error, err);
      error.querySelector(".error").focus?.();
    }
  });
  app.replaceChildren(h("div", { class: "panel" }, form));
  sync();
  form.querySelector("#title").focus();
}
