/**
 * The new-survey form (#/new, admins only): items, question, privacy model, participation
 * (suggestions and reports, public results) and the planner.
 */
import { api, showError } from "/static/api.js";
import { announce, h, numberField, pct } from "/static/dom.js";
import { truthProbability } from "/static/privrank.js";
import { app, session } from "/static/session.js";
import { accuracyPreview } from "/static/view-plan.js";

function epsilonMeaning(eps) {
  if (!(eps > 0)) return "";
  return `With ε = ${eps}, a single answer is truthful with probability e^ε/(1+e^ε) = ${pct(truthProbability(eps))}.`;
}

export function newSurveyView() {
  if (session.role !== "admin") {
    app.replaceChildren(h("p", { class: "error" }, "Creating surveys needs an admin key."));
    return;
  }
  const meaning = h("p", { id: "eps-meaning", class: "hint", "aria-live": "polite" }, epsilonMeaning(1));
  const local = h(
    "fieldset",
    { id: "local-fields" },
    h("legend", {}, "Local privacy (answers randomized before they are stored)"),
    numberField("eps-default", "ε given to respondents who do not choose", 1, { min: 0.001, max: 30 }),
    meaning,
    numberField("eps-min", "Smallest ε a respondent may choose", 0.5, { min: 0.001, max: 30 }),
    numberField("eps-max", "Largest ε a respondent may choose", 3, { min: 0.001, max: 30 }),
    numberField("budget", "Total ε one respondent may spend (empty: no cap)", "", { min: 0.001 }),
  );
  const central = h(
    "fieldset",
    { id: "central-fields", hidden: true },
    h("legend", {}, "Central privacy (true answers stored; only private releases leave)"),
    numberField("total-budget", "Total ε all releases may spend", 3, { min: 0.001, max: 100 }),
    numberField("max-comparisons", "Most comparisons one respondent may give (L)", 5, { min: 1, step: 1 }),
  );
  const checkbox = (id, text, attrs = {}) =>
    h(
      "div",
      { class: "field" },
      h("label", { class: "check" }, h("input", { type: "checkbox", id, ...attrs }), text),
    );
  const suggestFields = h(
    "div",
    { id: "suggestion-fields", class: "sub-fields", hidden: true },
    numberField("per-respondent", "Ideas one participant may suggest", 3, { min: 1, max: 20, step: 1 }),
    h(
      "fieldset",
      {},
      h("legend", {}, "Moderation"),
      h(
        "div",
        { class: "choice-row" },
        h(
          "label",
          {},
          h("input", { type: "radio", name: "moderation", value: "before", checked: true }),
          "A moderator approves each idea before it is shown",
        ),
        h(
          "label",
          {},
          h("input", { type: "radio", name: "moderation", value: "after" }),
          "Show ideas at once; moderators review them after",
        ),
      ),
    ),
    numberField("flag-threshold", "Reports that send an item to review", 3, { min: 1, max: 100, step: 1 }),
  );
  const participation = h(
    "fieldset",
    { id: "participation-fields" },
    h("legend", {}, "Participation"),
    h(
      "div",
      { id: "suggestion-choice" },
      checkbox("suggestions-enabled", "Participants may suggest items (and report items)"),
      suggestFields,
    ),
    checkbox("public-results", "Publish results at /r/{id} (anyone with the link sees the ranking)"),
    checkbox("results-on-finish", "Show results at the end of the respondent page", { disabled: true }),
  );
  const val = (id) => form.querySelector(`#${id}`).value.trim();
  const items = () =>
    val("items")
      .split("\n")
      .map((s) => s.trim())
      .filter(Boolean);
  const planner = accuracyPreview(val, items);
  const error = h("div", { id: "create-error" });
  const form = h(
    "form",
    { id: "create-form" },
    h("h2", {}, "New survey"),
    h(
      "div",
      { class: "field" },
      h("label", { for: "title" }, "Title"),
      h("input", { id: "title", type: "text", required: true, maxlength: 500 }),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: "items" }, "Items, one per line"),
      h("textarea", { id: "items", required: true, "aria-describedby": "items-hint" }),
      h("p", { id: "items-hint", class: "hint" }, "At least two; labels must be unique."),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, "Question"),
      h(
        "div",
        { class: "choice-row" },
        h(
          "label",
          {},
          h("input", { type: "radio", name: "kind", value: "pairwise", checked: true }),
          "Pairs (which of two matters more?)",
        ),
        h(
          "label",
          {},
          h("input", { type: "radio", name: "kind", value: "ranking" }),
          "A ranking of all items",
        ),
      ),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, "Privacy model"),
      h(
        "div",
        { class: "choice-row" },
        h(
          "label",
          {},
          h("input", { type: "radio", name: "model", value: "local", checked: true }),
          "Local (no one sees a true answer)",
        ),
        h(
          "label",
          {},
          h("input", { type: "radio", name: "model", value: "central", id: "model-central" }),
          "Central (trusted operator)",
        ),
      ),
    ),
    local,
    central,
    participation,
    planner,
    h("div", { class: "actions" }, h("button", { type: "submit", id: "create-btn" }, "Create survey")),
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
          }
        : {
            model: "local",
            epsilon_default: Number(val("eps-default")),
            epsilon_min: Number(val("eps-min")),
            epsilon_max: Number(val("eps-max")),
            respondent_budget: val("budget") === "" ? null : Number(val("budget")),
          };
    const body = { title: val("title"), kind: kind(), items: items(), privacy };
    // Participation settings only when chosen (the defaults are the API's own).
    if (form.querySelector("#suggestions-enabled").checked) {
      body.suggestions = {
        enabled: true,
        per_respondent: Number(val("per-respondent")),
        moderation: form.querySelector('input[name="moderation"]:checked').value,
        flag_threshold: Number(val("flag-threshold")),
      };
    }
    if (form.querySelector("#public-results").checked) body.public_results = true;
    if (form.querySelector("#results-on-finish").checked) body.results_on_finish = true;
    try {
      const s = await api("POST", "/v1/surveys", body);
      announce(`Survey "${s.title}" created`);
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
