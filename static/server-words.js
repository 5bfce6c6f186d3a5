/**
 * The sentences the service writes in English, in the dashboard's language. The service
 * sends each with a code (and the numbers it needs) beside it; here each is the dashboard
 * catalog's message for that code. A code the catalog does not know (a newer service) is
 * shown as the service wrote it, so that a sentence is never left out.
 */
import { fixed, hasMessage, language, percent, sig, t, tn } from "/static/i18n.js";

/**
 * Why a ranking has no intervals, from its `uncertainty` (or the win probabilities'
 * answer): the code is `reason` (pairwise surveys) or `reason_code` (ranking surveys,
 * whose `reason` is the sentence); else the service's `message` or `reason`.
 */
export function reasonText(u) {
  const code = u.reason_code ?? u.reason;
  return hasMessage(`uncertainty.reason.${code}`)
    ? t(`uncertainty.reason.${code}`, { n: u.min_rankings })
    : u.message || u.reason || "";
}

/** What a pairwise ranking's intervals are for, by their method (`uncertainty.estimand` otherwise). */
export function estimandText(u) {
  return hasMessage(`uncertainty.estimand.${u.method}`)
    ? t(`uncertainty.estimand.${u.method}`, { g: u.n_clusters })
    : u.estimand;
}

/** What a goal certifies, by its `estimand`, top K and level (`estimand_text` otherwise). */
export function goalEstimandText(g) {
  const level = percent(g.level);
  if (g.top_k === null || g.top_k === undefined)
    return hasMessage(`goal.estimand.${g.estimand}`)
      ? t(`goal.estimand.${g.estimand}`, { level })
      : g.estimand_text;
  return hasMessage(`goal.estimand.${g.estimand}.other`)
    ? tn(`goal.estimand.${g.estimand}`, g.top_k, { level })
    : g.estimand_text;
}

/** How a federated round broke ties, by its method (the result's `tie_break` otherwise). */
export function tieBreakText(x) {
  return hasMessage(`rounds.tie_break.${x.method}`) ? t(`rounds.tie_break.${x.method}`) : x.result.tie_break;
}

/** Site names as a list in the page's language ("north, south and east"). */
function names(sites) {
  return new Intl.ListFormat(language(), { type: "conjunction" }).format(sites.map((z) => z.name));
}

/**
 * A federated round's privacy from what its sites declared (`sites`, `privacy`), as
 * app/federation/service.py's privacy_summary words it; the service's `statement` when a
 * site declared something the dashboard does not know.
 */
export function roundPrivacyText(x) {
  const sites = x.sites;
  if (sites.some((z) => z.privatization && !["mallows", "none"].includes(z.privatization)))
    return x.privacy.statement;
  const waiting = sites.filter((z) => !z.contributed);
  if (waiting.length === sites.length) return t("rounds.privacy.none_yet");
  const unknown = sites.filter((z) => z.contributed && !z.privatization);
  const mallows = sites.filter((z) => z.privatization === "mallows" && z.epsilon !== null);
  const plain = sites.filter((z) => z.privatization === "none");
  const perSite = mallows.map((z) => t("rounds.privacy.site_eps", { name: z.name, eps: sig(z.epsilon, 3) }));
  const parts = [];
  const m = Number(x.parameters.n_items ?? 0);
  if (!waiting.length && !plain.length && !unknown.length && x.privacy.epsilon_max !== null) {
    const eps = x.privacy.epsilon_max;
    const params = { eps: sig(eps, 3), bound: sig((eps * m) / 2, 3), m, sites: perSite.join(", ") };
    parts.push(
      new Set(mallows.map((z) => z.epsilon)).size > 1
        ? t("rounds.privacy.all_per_site", params)
        : t("rounds.privacy.all", params),
    );
  } else {
    if (mallows.length)
      parts.push(
        tn("rounds.privacy.mallows", mallows.length, { sites: names(mallows), eps: perSite.join(", ") }),
      );
    if (plain.length) parts.push(tn("rounds.privacy.plain", plain.length, { sites: names(plain) }));
    if (unknown.length) parts.push(tn("rounds.privacy.unknown", unknown.length, { sites: names(unknown) }));
    if (waiting.length)
      parts.push(t("rounds.privacy.waiting", { sites: waiting.map((z) => z.name).join(", ") }));
  }
  return `${parts.join("; ")}. ${t("rounds.privacy.unverified")}`;
}

const given = (x) => x !== null && x !== undefined;

/**
 * Why a central release costs what it does, from its method, unit, ε, cost and, on zCDP
 * surveys, ρ, cost_rho and δ (app/releases/service.py's cost_explanation in words); the
 * release's `cost_explanation` for a unit the dashboard does not know.
 */
export function costText(r) {
  if (!hasMessage(`central.unit.${r.unit}`)) return r.cost_explanation;
  const params = { eps: sig(r.epsilon, 4), cost: sig(r.cost, 4), unit: t(`central.unit.${r.unit}`) };
  if (given(r.cost_rho) && given(r.delta)) {
    Object.assign(params, { cost_rho: sig(r.cost_rho, 4), delta: String(r.delta) });
    if (!given(r.rho)) return t("central.cost.zcdp_pure", params);
    const per = r.unit === "edge" ? Math.round(Math.sqrt(r.cost_rho / r.rho)) : 1;
    return t(`central.cost.zcdp_${r.unit}`, { ...params, rho: sig(r.rho, 4), per });
  }
  const per = r.epsilon > 0 ? Math.round(r.cost / r.epsilon) : 0;
  const text = t(`central.cost.${r.unit}`, { ...params, per });
  return r.unit === "edge" && r.method === "noisy_counts"
    ? `${text} ${t("central.cost.noisy_counts", params)}`
    : text;
}

const expit = (x) => 1 / (1 + Math.exp(-x));

/**
 * What the accuracy preview (GET /v1/plan) assumes, from its design and its true-score
 * model (`score_model` with `spread` or `gap`); the plan's `assumption` for a model the
 * dashboard does not know.
 */
export function planAssumptionText(p) {
  const model = p.score_model;
  if (!hasMessage(`plan.truth.${model}`)) return p.assumption;
  if ((model === "uniform" && !given(p.spread)) || (model === "even" && !given(p.gap))) return p.assumption;
  const truth = t(`plan.truth.${model}`, {
    spread: given(p.spread) ? sig(p.spread, 4) : "",
    beats: given(p.spread) ? percent(expit(2 * p.spread)) : "",
    gap: given(p.gap) ? sig(p.gap, 4) : "",
    points: given(p.gap) ? Math.round(100 * (expit(p.gap) - 0.5)) : "",
  });
  return t("plan.assumption", {
    truth,
    respondents: p.n_respondents,
    pairs: p.pairs_per_respondent,
    eps: new Intl.ListFormat(language(), { type: "disjunction" }).format(p.epsilon.map((e) => sig(e, 4))),
    k: p.k,
  });
}

/**
 * What "how many more respondents?" assumes (GET /v1/surveys/{id}/plan asked, as the
 * dashboard asks, without the new respondents' design: they copy the current ones), from
 * its scores' source, τ and where τ came from, and the current respondents and answers,
 * as app/stats/survey_plan.py's assumption_text words it; the plan's `assumption` for a
 * source the dashboard does not know.
 */
export function surveyPlanAssumptionText(r) {
  const p = r.plan;
  if (!hasMessage(`plan.survey.source.${r.scores}`) || !(p.current_respondents > 0)) return p.assumption;
  const level = percent(r.level);
  const interval = r.tau_source === "query" ? null : r.tau_interval;
  const origin = !interval
    ? t("plan.survey.tau_origin.given")
    : interval[1] < 0.005
      ? t("plan.survey.tau_origin.no_sign")
      : t("plan.survey.tau_origin.interval", { level, lo: fixed(interval[0]), hi: fixed(interval[1]) });
  return t("plan.survey.assumption", {
    source: t(`plan.survey.source.${r.scores}`),
    respondents: p.current_respondents,
    answers: p.current_comparisons,
    mean: fixed(p.current_comparisons / p.current_respondents, 1),
    hetero:
      r.tau > 0
        ? t("plan.survey.hetero.tau", { tau: fixed(r.tau), origin })
        : t("plan.survey.hetero.none", { origin }),
    level,
    k: r.k,
  });
}
