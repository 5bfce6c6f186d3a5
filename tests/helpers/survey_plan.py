"""The survey planner's reference: a direct simulation of a survey, answer by answer,
served exactly as ``app.respondents.assignment.next_pairs`` serves pairs (fewest answers
first, random tie-break, never a pair twice), with a full random-effect vector per
respondent, every answer privatized, and the full ``confidence`` + ``rank_confidence``
of ``GET …/ranking`` in every simulated survey (used by tests/stats/test_survey_plan.py
and bench_coverage)."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from app.stats import fit_debiased_mle_stats, pair_stats, privatize
from app.stats.inference import Clusters, IntervalsUnavailable, confidence, rank_confidence
from app.stats.random_effects import attenuation
from app.stats.survey_plan import SurveyDesign


def direct_simulation(design, theta, k, added, tau, reps, seed, level=0.95):
    """P(certified) and E(certified items) by simulating the survey answer by answer.

    The new respondents arrive one by one; each copies a random current respondent's
    profile and is served its pairs as ``next_pairs`` serves them (the least-answered
    first, ties broken by a fresh uniform key per pair, never a pair twice: the first
    ``size`` pairs of one ordering of all pairs). The replicates are independent
    surveys, so each respondent's step is taken in all of them at once; everything
    after the serving (random effects, answers, privatization, the fit, the intervals
    and the top-K rule) runs survey by survey.
    """
    rng = np.random.default_rng(seed)
    m = design.n_items
    a, b = np.triu_indices(m, 1)
    index = np.full((m, m), -1)
    index[a, b] = np.arange(a.size)
    counts0 = np.bincount(
        index[np.minimum(design.i, design.j), np.maximum(design.i, design.j)], minlength=a.size
    )
    profiles = design.profiles()
    sizes = np.array([p.size for p in profiles])
    pick = rng.integers(len(profiles), size=(reps, added))  # the profile each new respondent copies
    counts = np.tile(counts0.astype(float), (reps, 1))
    rows = np.arange(reps)[:, None]
    served = np.empty((added, reps, a.size), dtype=np.int64)  # each respondent's ordering of the pairs
    for r in range(added):
        order = np.argsort(counts + rng.random(counts.shape), axis=1)  # fewest answers first, random ties
        served[r] = order
        taken = np.arange(a.size)[None, :] < sizes[pick[:, r]][:, None]
        counts[np.broadcast_to(rows, order.shape)[taken], order[taken]] += 1
    flips = rng.random((reps, added, a.size)) < 0.5
    scale = attenuation(tau)
    certified, items = [], []
    for q in range(reps):
        taken = np.arange(a.size)[None, :] < sizes[pick[q]][:, None]  # (added, pairs): respondent order
        pair = served[:, q][taken]
        flip = flips[q][taken]
        i = np.concatenate((design.i, np.where(flip, b[pair], a[pair])))
        j = np.concatenate((design.j, np.where(flip, a[pair], b[pair])))
        eps = np.concatenate((design.epsilon, *(profiles[x] for x in pick[q])))
        who = np.repeat(np.arange(added), sizes[pick[q]])
        resp = np.concatenate((design.respondent, design.n_respondents + who))
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
