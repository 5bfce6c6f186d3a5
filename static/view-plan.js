/**
 * The planners: the new-survey form's accuracy preview (GET /v1/plan) and the survey
 * page's "how many more respondents?" (GET /v1/surveys/{id}/plan), each with its
 * assumption in words.
 */
import { apiOrJob, showError } from "/static/api.js";
import { h, numberField, section } from "/static/dom.js";
import { fixed, num, percent, t } from "/static/i18n.js";
import { planAssumptionText, surveyPlanAssumptionText } from "/static/server-words.js";

/**
 * How many answers at `eps` fit in a total of `budget`: ⌊budget / ε⌋, with the service's
 * tolerance for a budget that is an exact multiple (app/privacy/service.py).
 */
export const pairsWithin = (budget, eps) => Math.floor((budget + 1e-9) / eps);

/**
 * The new-survey form's "Accuracy preview" fieldset. `val(id)` reads a field of the
 * form; `items()` lists the items typed so far; `budget()` is the total ε a respondent may
 * spend (null: no cap). Each simulated respondent answers what the survey would let them:
 * at most the pairs asked for, the pairs there are, and the pairs the cap allows at the
 * default ε (the service stops a respondent at the cap, app/respondents/assignment.py).
 */
export function accuracyPreview(val, items, budget = () => null) {
  const plannerOut = h("div", { id: "plan-out", "aria-live": "polite" });
  const preview = async () => {
    const labels = items();
    if (labels.length < 2) {
      plannerOut.replaceChildren(h("p", { class: "error" }, t("plan.need_items")));
      return;
    }
    plannerOut.replaceChildren(h("p", { class: "hint" }, t("plan.simulating")));
    const allPairs = (labels.length * (labels.length - 1)) / 2;
    const eps = Number(val("eps-default"));
    const cap = budget();
    const affordable = cap === null ? allPairs : pairsWithin(cap, eps);
    if (affordable < 1) {
      plannerOut.replaceChildren(h("p", { class: "error" }, t("plan.over_budget", { budget: cap, eps })));
      return;
    }
    const pairs = Math.min(Number(val("plan-pairs")), allPairs, affordable);
    const q = new URLSearchParams({
      items: labels.length,
      respondents: val("plan-respondents"),
      pairs_per_respondent: pairs,
      epsilon: eps,
      k: Math.min(Number(val("plan-k")), labels.length),
    });
    try {
      const p = (await apiOrJob(`/v1/plan?${q}`, plannerOut, t("plan.simulating"))).plan;
      plannerOut.replaceChildren(
        h(
          "dl",
          { class: "stats" },
          h(
            "div",
            {},
            h("dt", {}, t("plan.p_exact", { k: p.k })),
            h("dd", {}, percent(p.p_exact_top_k.mean)),
          ),
          h("div", {}, h("dt", {}, t("plan.wrong_pairs")), h("dd", {}, percent(p.kendall_error.mean))),
          h("div", {}, h("dt", {}, t("plan.per_pair")), h("dd", {}, fixed(p.comparisons_per_pair, 1))),
          h(
            "div",
            {},
            h("dt", {}, t("plan.total_eps")),
            h("dd", {}, fixed(p.respondent_epsilon_total[0], 2)),
          ),
        ),
        h(
          "p",
          { class: "hint" },
          t("plan.from", {
            replications: p.replications,
            respondents: p.n_respondents,
            pairs: p.pairs_per_respondent,
            all: allPairs,
          }),
          affordable < Math.min(Number(val("plan-pairs")), allPairs)
            ? ` ${t("plan.capped", { budget: cap, eps, pairs })}`
            : "",
        ),
        h("p", { class: "hint", id: "plan-assumption" }, planAssumptionText(p)),
      );
    } catch (err) {
      showError(plannerOut, err);
    }
  };
  return h(
    "fieldset",
    { id: "planner" },
    h("legend", {}, t("plan.legend")),
    numberField("plan-respondents", t("plan.respondents"), 200, { min: 1, step: 1 }),
    numberField("plan-pairs", t("plan.pairs"), 10, { min: 1, step: 1 }),
    numberField("plan-k", t("plan.k"), 3, { min: 1, step: 1 }),
    h(
      "div",
      { class: "actions" },
      h(
        "button",
        { type: "button", class: "secondary", id: "plan-btn", onclick: preview },
        t("plan.preview"),
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
    out.replaceChildren(h("p", { class: "hint" }, t("plan.survey.simulating")));
    const q = new URLSearchParams({ k, target: Number(target.value) / 100 });
    try {
      // A long simulation runs as a job: its progress shows until the answer comes.
      const r = await apiOrJob(`/v1/surveys/${s.id}/plan?${q}`, out, t("plan.survey.simulating"));
      const p = r.plan;
      const certified = percent(p.p_certified.mean);
      const headline =
        r.solution === 0
          ? t("plan.survey.certified", { k, p: certified })
          : r.reached
            ? t("plan.survey.reached", { n: r.solution, k, p: certified })
            : t(r.search_limit === "work" ? "plan.survey.not_reached_work" : "plan.survey.not_reached", {
                n: p.added_respondents,
                k,
                p: certified,
              });
      out.replaceChildren(
        h("p", { id: "survey-plan-answer" }, h("strong", {}, headline)),
        h(
          "dl",
          { class: "stats" },
          h(
            "div",
            {},
            h("dt", {}, t("plan.survey.p_certified", { k })),
            h("dd", {}, t("plan.survey.p_pm", { p: certified, se: fixed(100 * p.p_certified.se, 0) })),
          ),
          h(
            "div",
            {},
            h("dt", {}, t("plan.survey.p_right", { k })),
            h("dd", {}, percent(p.p_exact_top_k.mean)),
          ),
          h("div", {}, h("dt", {}, t("plan.survey.tau")), h("dd", {}, fixed(r.tau))),
          h("div", {}, h("dt", {}, t("plan.survey.added")), h("dd", {}, num(p.added_comparisons))),
        ),
        h("p", { class: "hint", id: "survey-plan-assumption" }, surveyPlanAssumptionText(r)),
      );
    } catch (err) {
      showError(out, err);
    }
  };
  return section(
    "survey-plan",
    t("plan.survey.title"),
    h("p", { class: "hint" }, t("plan.survey.hint")),
    h("div", { class: "field" }, h("label", { for: "plan-target" }, t("plan.survey.target")), target),
    h(
      "div",
      { class: "actions" },
      h(
        "button",
        { type: "button", class: "secondary", id: "survey-plan-btn", onclick: run },
        t("plan.survey.run"),
      ),
    ),
    out,
  );
}
