/**
 * A survey's privacy in plain words, from the numbers the service computes (`privacy.summary`
 * of GET /v1/surveys/{id}, `privacy_summary` of GET …/public), so that the dashboard and the
 * respondent page state the same guarantee. The words are the page's catalog's "summary.*"
 * messages (the dashboard speaks of "a respondent", the respondent page of "you"); the
 * numbers are placeholders, formatted for the page's language.
 *
 * Guess bounds are e^ε/(1+e^ε): the best share of right guesses about one yes-or-no fact that
 * anyone who sees everything stored (central: everything released) can reach, against 50% for
 * a coin toss (docs/how-to/privacy.md, "Privacy by default"). Central surveys are worded by their
 * `accounting` ("pure": pure ε-DP releases summed against the total budget; "zcdp": their
 * ρ summed, shown as (ε, δ)), each with its own "summary.central.<accounting>" message. A
 * survey taking suggestions adds its batch ("summary.suggestions").
 */
import { num, percent, sig, t, upTo } from "/static/i18n.js";

/** The summary's sentences, one paragraph's worth. */
export function privacySummaryText(s) {
  const chance = percent(0.5);
  if (s.model === "central") {
    const central = t(`summary.central.${s.accounting || "pure"}`, {
      max: s.max_comparisons_per_respondent,
      total: sig(s.total_budget, 3),
      delta: (s.delta ?? 0).toExponential(0),
      one_in: num(Math.round(1 / (s.delta || 1))),
      guess: upTo(s.guess_bound_total),
      chance,
    });
    return s.suggestion_batch ? `${central} ${t("summary.suggestions", { k: s.suggestion_batch })}` : central;
  }
  const parts = [];
  if (s.kind === "ranking") {
    parts.push(
      t("summary.local.ranking", {
        eps: sig(s.epsilon_default, 3),
        swap: percent(s.swap_probability_default),
        guess: upTo(s.guess_bound_default),
        guess_whole: upTo(s.guess_bound_whole_ranking_default),
        eps_whole: sig(s.epsilon_whole_ranking_default, 3),
        chance,
      }),
    );
  } else {
    parts.push(
      t("summary.local.pairwise", {
        eps: sig(s.epsilon_default, 3),
        guess: upTo(s.guess_bound_default),
        eps_max: sig(s.epsilon_max, 3),
        guess_max: upTo(s.guess_bound_max),
        chance,
      }),
    );
  }
  const budget = { budget: sig(s.respondent_budget ?? 0, 3), guess: upTo(s.guess_bound_budget ?? 0.5) };
  const capped = s.budget_policy === "capped";
  if (s.kind === "ranking")
    parts.push(t(capped ? "summary.budget.ranking" : "summary.budget.ranking_one", budget));
  else if (capped) parts.push(t("summary.budget.capped", { ...budget, n: s.answers_at_default }));
  else parts.push(t(`summary.budget.${s.budget_policy}`, { n: s.pairs }));
  if (s.suggestion_batch) parts.push(t("summary.suggestions", { k: s.suggestion_batch }));
  return parts.join(" ");
}
