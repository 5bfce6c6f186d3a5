"""The survey planner's reference: a direct simulation of a survey, answer by answer,
served exactly as ``app.services.assignment.next_pairs`` serves pairs (fewest answers
first, random tie-break, never a pair twice), with a full random-effect vector per
respondent, every answer privatized, and the full ``confidence`` + ``rank_confidence``
of ``GET …/ranking`` in every simulated survey (used by tests/stats/test_survey_plan.py
and bench_coverage)."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from app.stats import fit_debiased_mle_stats, pair_stats, privatize
from app.stats.inference import Clusters, IntervalsUnavailable, confidence, rank_confidence
from app.stats.survey_plan import SurveyDesign, attenuation


def direct_simulation(design, theta, k, added, tau, reps, seed, level=0.95):
    """P(certified) and E(certified items) by simulating the survey answer by answer."""
    rng = np.random.default_rng(seed)
    m = design.n_items
    a, b = np.triu_indices(m, 1)
    index = {(int(x), int(y)): p for p, (x, y) in enumerate(zip(a, b, strict=True))}
    profiles = design.profiles()
    scale = attenuation(tau)
    certified, items = [], []
    for _ in range(reps):
        counts = np.zeros(a.size)
        for x, y in zip(design.i, design.j, strict=True):
            counts[index[(min(x, y), max(x, y))]] += 1
        i, j, eps, resp = list(design.i), list(design.j), list(design.epsilon), list(design.respondent)
        for r in range(added):
            profile = profiles[rng.integers(len(profiles))]
            keys = counts + rng.random(a.size)  # next_pairs: fewest answers first, random tie-break
            chosen = np.argsort(keys)[: profile.size]
            for p, e in zip(chosen, profile, strict=True):
                flip = rng.random() < 0.5
                i.append(b[p] if flip else a[p])
                j.append(a[p] if flip else b[p])
                eps.append(e)
                resp.append(design.n_respondents + r)
                counts[p] += 1
        i, j, eps, resp = np.array(i), np.array(j), np.array(eps), np.array(resp)
        u = tau * rng.standard_normal((design.n_respondents + added, m))
        y = rng.random(i.size) < expit(scale * (theta[i] - theta[j]) + u[resp, i] - u[resp, j])
        y_t = privatize(y.astype(int), eps, rng).astype(float)
        fit = fit_debiased_mle_stats(pair_stats(m, i, j, y_t, eps))
        try:
            conf = confidence(fit, level, clusters=Clusters.from_answers(m, i, j, y_t, eps, resp))
        except IntervalsUnavailable:
            certified.append(0.0)
            items.append(0.0)
            continue
        ranks = rank_confidence(
            conf.estimate, conf.cov, level, k, rng=rng, component=conf.component, point=conf.theta
        )
        n = int(ranks.top_k_certain.sum())
        certified.append(float(n == k))
        items.append(float(n))
    return np.array(certified), np.array(items)


def unbalanced_design(rng):
    """6 items; 30 respondents × 4 pairs at ε ∈ {1, 2}, half of them only ever asked about items 0–3."""
    m = 6
    a, b = np.triu_indices(m, 1)
    inner = np.flatnonzero(b < 4)
    i, j, eps, resp = [], [], [], []
    for r in range(30):
        pool = inner if r < 15 else np.arange(a.size)
        for p in rng.choice(pool, 4, replace=False):
            i.append(a[p])
            j.append(b[p])
            eps.append(1.0 if r % 3 == 0 else 2.0)
            resp.append(r)
    return SurveyDesign.from_comparisons(m, i, j, eps, resp)
