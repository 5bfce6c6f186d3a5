"""The bound bench_goal_limits --bound prints: what any choice of pairs could save.

These check the computation against cases with known answers; the figures themselves
are the benchmark's (docs/uncertainty.md §9).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from tests.benchmarks.bench_goal_limits import (
    characteristic_ratio,
    closest_alternative,
    mixture_regret,
    oracle_likelihood,
)


def _kl(p: float, q: float) -> float:
    return p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))


def test_two_items_closest_alternative_is_a_tie_and_no_design_beats_uniform() -> None:
    eps, theta = 1.0, np.array([0.6, -0.6])
    q0 = 1 / (1 + np.exp(eps))
    truth = q0 + (1 - 2 * q0) * expit(1.2)
    value, per_pair = closest_alternative(theta, np.array([1.0]), 0, 1, eps)
    # the only alternative on the boundary is λ_0 = λ_1: answers with mean ½
    assert value == pytest.approx(_kl(truth, 0.5), rel=1e-6)
    assert per_pair == pytest.approx([_kl(truth, 0.5)], rel=1e-6)
    r = characteristic_ratio(theta, 1, eps)
    assert r["lower"] == pytest.approx(1.0, abs=1e-9) and r["upper"] == pytest.approx(1.0, abs=1e-6)


def test_ratio_is_bracketed_and_the_optimal_design_leans_on_the_boundary() -> None:
    # one clear winner among four: pairs not involving it or its nearest rival say little
    theta = np.array([1.5, 0.0, -0.5, -2.0])
    r = characteristic_ratio(theta, 1, 1.0)
    assert 1.0 <= r["lower"] <= r["upper"] * (1 + 1e-9)
    assert r["upper"] - r["lower"] <= 2e-3 * r["upper"] + 1e-9
    w = r["w"]  # pairs in np.triu_indices(4, 1) order: (0,1) (0,2) (0,3) (1,2) (1,3) (2,3)
    assert w[0] == max(w)  # the winner against its nearest rival
    assert w[5] < 1 / 6  # the two weakest against each other: less than uniform


def test_mixture_regret_without_answers_is_the_prior_penalty_and_grows_like_half_log_n() -> None:
    theta = np.array([1.0, 0.0, -1.0])
    w = np.full(3, 1 / 3)
    assert mixture_regret(theta, 1.0, w, 0.0) == pytest.approx(0.5 * theta @ theta)
    # two free dimensions: ½·2·log(100) more from n to 100n once n·information ≫ 1
    grow = mixture_regret(theta, 1.0, w, 1e8) - mixture_regret(theta, 1.0, w, 1e6)
    assert grow == pytest.approx(np.log(100.0), rel=1e-3)


def test_likelihood_prototype_certifies_an_easy_top_one_and_pays_its_regret() -> None:
    theta = np.array([2.0, 0.0, -2.0])
    used, regret = oracle_likelihood(theta, 1, 2.0, np.full(3, 1 / 3), np.random.default_rng(5), cap=20_000)
    assert used is not None and used <= 20_000
    # the plug-in's regret against the best fit in hindsight: about (m − 1)/2 · log n = log n
    assert 1.0 < regret < 3 * np.log(used)
