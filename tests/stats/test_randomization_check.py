"""The randomization check: stored answers against randomized response at their declared ε.

Hoeffding's bound holds whatever the true answers, so honestly randomized answers get a
p-value below a threshold with probability at most that threshold; true answers declared
privatized are flagged. And a bootstrap refuses the data a sandwich refuses."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from app.stats import fit_debiased_mle, privatize
from app.stats.inference import (
    Clusters,
    IntervalsUnavailable,
    bootstrap_confidence,
    cluster_bootstrap_confidence,
    confidence,
)
from app.stats.mechanisms import randomization_p_value


def _survey(rng, m, respondents, eps, randomize):
    i, j = np.triu_indices(m, 1)
    i, j = np.tile(i, respondents), np.tile(j, respondents)
    y = (i < j).astype(np.int8)  # unanimous true answers: the hardest honest case
    reported = privatize(y, eps, rng=rng) if randomize else y
    return i, j, reported, np.repeat(np.arange(respondents), m * (m - 1) // 2)


def _p(m, i, j, y, eps):
    key = i * m + j
    _, inv = np.unique(key, return_inverse=True)
    k = inv.max() + 1
    return randomization_p_value(
        np.bincount(inv, minlength=k),
        np.bincount(inv, y, k),
        np.bincount(inv, np.full(i.size, expit(eps)), k),
    )


def test_honestly_randomized_answers_are_flagged_at_most_at_the_level():
    """400 surveys of unanimous true answers randomized at ε = 1 (each pair's reported wins
    sit exactly at the bound's edge in expectation): the share with p < 0.05 is at most
    0.05 plus 3 binomial standard errors (Hoeffding is conservative: it is far below)."""
    rng = np.random.default_rng(7)
    ps = np.array([_p(5, *_survey(rng, 5, 100, 1.0, True)[:3], 1.0) for _ in range(400)])
    assert np.mean(ps < 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 400)
    assert ps.min() > 1e-6


def test_true_answers_declared_privatized_are_flagged():
    rng = np.random.default_rng(8)
    i, j, y, _ = _survey(rng, 5, 100, 1.0, False)
    assert _p(5, i, j, y, 1.0) < 1e-12
    # Without privacy (ε = ∞) nothing is impossible.
    assert _p(5, i, j, y, np.inf) == 1.0


def test_inputs_must_line_up():
    with pytest.raises(ValueError):
        randomization_p_value([1, 2], [1], [1, 1])
    assert randomization_p_value([], [], []) == 1.0


def test_bootstraps_refuse_separated_data_like_the_sandwich():
    """True answers declared at ε = 1: the debiased wins leave [0, 1], the unpenalized fit
    does not exist. The sandwich refuses (not_identified); so do both bootstraps, instead of
    replicates all held by the same ridge (standard errors of 1e-13)."""
    rng = np.random.default_rng(9)
    i, j, y, resp = _survey(rng, 5, 200, 1.0, False)
    fit = fit_debiased_mle(5, i, j, y, 1.0)
    clusters = Clusters.from_answers(5, i, j, y, 1.0, resp)
    for run in (
        lambda: confidence(fit, clusters=clusters),
        lambda: cluster_bootstrap_confidence(fit, clusters, n_boot=20, rng=np.random.default_rng(0)),
        lambda: bootstrap_confidence(5, i, j, 1.0, fit, n_boot=20, rng=np.random.default_rng(0)),
    ):
        with pytest.raises(IntervalsUnavailable) as exc:
            run()
        assert exc.value.reason == "not_identified"
