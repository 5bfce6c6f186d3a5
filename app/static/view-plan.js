/**
 * The planners: the new-survey form's accuracy preview (GET /v1/plan) and the survey
 * page's "how many more respondents?" (GET /v1/surveys/{id}/plan), each with its
 * assumption in words.
 */
import { apiOrJob, showError } from "/static/api.js";
import { fmt, h, numberField, pct, section } from "/static/dom.js";

/**
 * The new-survey form's "Accuracy preview" fieldset. `val(id)` reads a field of the
 * form; `items()` lists the items typed so far.
 */
export function accuracyPreview(val, items) {
  const plannerOut = h("div", { id: "plan-out", "aria-live": "polite" });
  const preview = async () => {
    const labels = items();
    if (labels.length < 2) {
      plannerOut.replaceChildren(h("p", { class: "error" }, "List at least two items first."));
      return;
    }
    plannerOut.replaceChildren(h("p", { class: "hint" }, "Simulating…"));
    const allPairs = (labels.length * (labels.length - 1)) / 2;
    const q = new URLSearchParams({
      items: labels.length,
      respondents: val("plan-respondents"),
      pairs_per_respondent: Math.min(Number(val("plan-pairs")), allPairs),
      epsilon: val("eps-default"),
      k: Math.min(Number(val("plan-k")), labels.length),
    });
    try {
      const p = (await apiOrJob(`/v1/plan?${q}`, plannerOut, "Simulating…")).plan;
      plannerOut.replaceChildren(
        h(
          "dl",
          { class: "stats" },
          h("div", {}, h("dt", {}, `P(exact top-${p.k} found)`), h("dd", {}, pct(p.p_exact_top_k.mean))),
          h("div", {}, h("dt", {}, "Pairs ordered wrongly"), h("dd", {}, pct(p.kendall_error.mean))),
          h("div", {}, h("dt", {}, "Comparisons per pair"), h("dd", {}, fmt(p.comparisons_per_pair, 1))),
          h(
            "div",
            {},
            h("dt", {}, "Each respondent's total ε"),
            h("dd", {}, fmt(p.respondent_epsilon_total[0], 2)),
          ),
        ),
        h(
          "p",
          { class: "hint" },
          `From ${p.replications} simulated surveys of ${p.n_respondents} respondents answering ${p.pairs_per_respondent} ` +
            `of the ${allPairs} pairs each.`,
        ),
        h("p", { class: "hint", id: "plan-assumption" }, p.assumption),
      );
    } catch (err) {
      showError(plannerOut, err);
    }
  };
  return h(
    "fieldset",
    { id: "planner" },
    h("legend", {}, "Accuracy preview (the planner)"),
    numberField("plan-respondents", "Respondents you expect", 200, { min: 1, step: 1 }),
    numberField("plan-pairs", "Pairs each answers", 10, { min: 1, step: 1 }),
    numberField("plan-k", "Size K of the top set you care about", 3, { min: 1, step: 1 }),
    h(
      "div",
      { class: "actions" },
      h(
        "button",
        { type: "button", class: "secondary", id: "plan-btn", onclick: preview },
        "Preview accuracy",
      ),
    ),
    plannerOut,
  );
}

/** "How many more respondents certify the top K?" — GET /v1/surveys/{id}/plan, with its assumption in words. */
export function surveyPlanSection(s, kInput) {
  const target = h("input", { id: "plan-target", type: "number", min: 1, max: 99, step: 1, value: 80 });
  const out = h("div", { id: "survey-plan-out", "aria-live": "polite" });
  const run = async (event) => {
    const button = event?.currentTarget;
    if (button) button.disabled = true; // one simulation at a time
    try {
      await plan();
    } finally {
      if (button) button.disabled = false;
    }
  };
  const plan = async () => {
    const k = Math.min(Number(kInput.value), s.items.length - 1);
    out.replaceChildren(h("p", { class: "hint" }, "Simulating this survey…"));
    const q = new URLSearchParams({ k, target: Number(target.value) / 100 });
    try {
      // A long simulation runs as a job: its progress shows until the answer comes.
      const r = await apiOrJob(`/v1/surveys/${s.id}/plan?${q}`, out, "Simulating this survey…");
      const p = r.plan;
      const headline =
        r.solution === 0
          ? `The top ${k} is already certified with probability ${pct(p.p_certified.mean)}.`
          : r.reached
            ? `About ${r.solution} more respondents certify the top ${k} with probability ${pct(p.p_certified.mean)}.`
            : `Even ${p.added_respondents} more respondents would certify the top ${k} only with probability ${pct(p.p_certified.mean)}` +
              (r.search_limit === "work"
                ? " (the simulation stopped there: larger sizes exceed the work one request may do)."
                : ".");
      out.replaceChildren(
        h("p", { id: "survey-plan-answer" }, h("strong", {}, headline)),
        h(
          "dl",
          { class: "stats" },
          h(
            "div",
            {},
            h("dt", {}, `P(top ${k} certified)`),
            h("dd", {}, `${pct(p.p_certified.mean)} ± ${fmt(100 * p.p_certified.se, 0)} pts`),
          ),
          h("div", {}, h("dt", {}, `P(estimated top ${k} right)`), h("dd", {}, pct(p.p_exact_top_k.mean))),
          h("div", {}, h("dt", {}, "Respondent effect τ"), h("dd", {}, fmt(r.tau))),
          h("div", {}, h("dt", {}, "Comparisons added"), h("dd", {}, String(p.added_comparisons))),
        ),
        h("p", { class: "hint", id: "survey-plan-assumption" }, p.assumption),
      );
    } catch (err) {
      showError(out, err);
    }
  };
  return section(
    "survey-plan",
    "How many more respondents?",
    h(
      "p",
      { class: "hint" },
      "Simulates this survey as it stands, plus new respondents, and counts how often its own intervals would certify the top K.",
    ),
    h("div", { class: "field" }, h("label", { for: "plan-target" }, "Wanted certainty (%)"), target),
    h(
      "div",
      { class: "actions" },
      h(
        "button",
        { type: "button", class: "secondary", id: "survey-plan-btn", onclick: run },
        "Plan from here",
      ),
    ),
    out,
  );
}
