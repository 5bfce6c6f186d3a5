"""Audits of privrank.js in the browser (docs/audits.md §2–3).

Exact: privrank.js's own randomizeComparison and mallowsPrivatize, evaluated in the page
at chosen 53-bit uniforms (``crypto.getRandomValues`` answering with the words of a given
k), give their laws on the 2⁵³-point grid (randomized response) and the 2¹⁰⁶-point grid
of a Mallows stage's two uniforms (``tests.helpers.audit.grid_law``); their
largest log ratio over neighbouring inputs equals ε to the grid's resolution, as the
server's samplers' (tests/audits/test_exact.py), for randomized response and the Mallows
mechanism with every m ≤ 5, at the edges of the accepted ε.

Black-box: 10⁶ draws per input
of ``randomizeComparison`` and ``mallowsPrivatize`` run inside the page, and two-sided
Clopper–Pearson bounds on ε (tests.helpers.audit, α = 10⁻⁸ per side). The page's
``crypto.getRandomValues`` is seeded (tests/browser/conftest.py): the outcome is the same
on every run; over seeds a correct privrank.js fails with probability below 4·10⁻⁸.

Events as for the server's samplers (tests/audits/test_samplers.py): randomized
response, winner a vs winner b, S = {a reported}; Mallows with m = 5, σ = (0, …, 4) vs
σ' = (1, …, 4, 0), S = {0 first}; each has log(P₁/P₀) = ε exactly.

The same audits at 10⁵ draws reject privrank.js with its flip probability doubled or its
Mallows dispersion doubled (half the noise), served to the page in place of the real
module: the mutation is made on the shipped source text.
"""

from __future__ import annotations

import itertools
import math

import httpx2
import numpy as np
import pytest

from app.stats.mechanisms import flip_probability
from app.stats.rankings import stage_pmf
from tests.audits.test_exact import EPSILONS, FLOAT_TOL, GRID_POINTS, mallows_stage_bounds
from tests.helpers.audit import (
    GRID,
    AuditError,
    audit,
    check_grid_laws,
    grid_laws,
    grid_resolution,
    identity_stages,
    mallows_law,
    max_log_ratio,
    neighbour_pairs,
    orderings,
)
from tests.helpers.browser import random_values_calls

#: Runs privrank.js's mechanism at each ε, on each input, with the uniforms of each row of
#: ``ks`` (integers k: uniform() returns k·2⁻⁵³), checking that it drew exactly those;
#: returns out[ε][input][row].
CONTROLLED = """async ([kind, epsilons, inputs, ks]) => {
    const mod = await import("/static/privrank.js");
    const seeded = crypto.getRandomValues;
    const set = (value) => Object.defineProperty(crypto, "getRandomValues", { value, configurable: true });
    let row = [];
    let at = 0;
    set((words) => {
        if (!(words instanceof Uint32Array) || words.length !== 2) throw new Error("not a uniform() draw");
        const k = row[at++];
        words[0] = Math.floor(k / 67108864) * 32; // uniform() = ((w0 >>> 5)·2²⁶ + (w1 >>> 6))/2⁵³
        words[1] = (k % 67108864) * 64;
        return words;
    });
    const run = (eps, x, r) => {
        row = r;
        at = 0;
        const out =
            kind === "rr"
                ? mod.randomizeComparison({ a: 0, b: 1, winner: x }, eps).winner
                : mod.mallowsPrivatize(x, eps);
        if (at !== r.length) throw new Error(`drew ${at} uniforms, not ${r.length}`);
        return out;
    };
    try {
        return epsilons.map((eps) => inputs.map((x) => ks.map((r) => run(eps, x, r))));
    } finally {
        set(seeded);
    }
}"""


def _ks(u, per_row: int = 1) -> list[list[int]]:
    """Each row's uniforms as integers k (exact: u is on the grid), its pair (or single
    uniform) repeated ``per_row`` times."""
    k = (np.asarray(u, dtype=np.float64) * GRID).reshape(len(u), -1)
    return [[int(x) for x in row] * per_row for row in k]


def _rr_laws(page) -> list[np.ndarray]:
    """Grid counts of (flipped, kept) for every ε of EPSILONS and true winner y = 0, 1."""

    def kept(u):
        out = np.asarray(page.evaluate(CONTROLLED, ["rr", list(EPSILONS), [0, 1], _ks(u)]))  # [ε, y, u]
        return (out == np.array([0, 1])[None, :, None]).reshape(-1, u.size).T  # columns (ε, y)

    laws = grid_laws(kept, [2] * (2 * len(EPSILONS)))
    check_grid_laws(kept, laws, np.random.default_rng(1), size=2_000)
    return laws


def _mallows_stage_laws(page, m: int) -> list[list[np.ndarray]]:
    """Grid counts (out of 2¹⁰⁶) of V⁽ᵗ⁾, t = 2..m, for every ε of EPSILONS (every stage
    drawing the same pair of uniforms)."""
    identity = list(range(m))

    def v_of(u):
        out = page.evaluate(CONTROLLED, ["mallows", list(EPSILONS), [identity], _ks(u, m - 1)])
        v = np.stack([identity_stages(per_eps[0]) for per_eps in out], axis=1)  # [u, ε, stage]
        return v.reshape(len(u), -1)  # columns (ε, t)

    sizes = [t for _ in EPSILONS for t in range(2, m + 1)]
    laws = grid_laws(v_of, sizes, uniforms=2)
    check_grid_laws(v_of, laws, np.random.default_rng(m), size=2_000, uniforms=2)
    return [laws[e * (m - 1) : (e + 1) * (m - 1)] for e in range(len(EPSILONS))]


def _mallows_shipped(page, m: int, eps: float, laws: list[np.ndarray]) -> float:
    def decode(inputs, vs):
        # For V⁽ᵗ⁾ = v, the first point of its interval of the 2¹⁰⁶ grid: Σ counts of smaller V,
        # as the pair (k₁, k₂).
        first = [list(itertools.accumulate(law[:-1], initial=0)) for law in laws]
        rows = [[k for c, v in enumerate(vec) for k in divmod(first[c][v], GRID)] for vec in vs]
        (out,) = page.evaluate(CONTROLLED, ["mallows", [eps], inputs.tolist(), rows])
        return out

    perms = orderings(m)
    return max_log_ratio(mallows_law(perms, laws, decode), neighbour_pairs(perms))


def test_privrank_js_exact_audit(server, new_page):
    """Randomized response: privrank.js flips with probability ⌈2⁵³p_ε⌉/2⁵³, as the server
    does, and so loses at most ε, short of it only by the grid's resolution. Mallows,
    m = 2..5: every stage's law within its rounding bound and the loss ε to FLOAT_TOL
    (docs/audits.md §2: the same figures as the server's sampler)."""
    page = new_page()
    page.goto(server.base + "/")
    rr = _rr_laws(page)
    for e, eps in enumerate(EPSILONS):
        p = float(flip_probability(eps))
        counts = rr[2 * e]
        assert np.array_equal(counts, rr[2 * e + 1]) and counts[0] == math.ceil(p * GRID)
        log_p = np.log(np.array([counts[::-1], counts]) / GRID)  # [y, ỹ]
        shipped = max_log_ratio(log_p, [(0, 1)])
        slack = 2 * grid_resolution(counts, np.array([p, 1 - p]), GRID_POINTS["rr"])
        tol = FLOAT_TOL * max(1, eps)
        assert eps - slack - tol <= shipped <= eps + tol, (eps, shipped)
    for m in (2, 3, 4, 5):
        for eps, laws in zip(EPSILONS, _mallows_stage_laws(page, m), strict=True):
            b = eps / (m - 1)
            slack = 2 * sum(
                grid_resolution(law, stage_pmf(t, b), mallows_stage_bounds(t, b), GRID**2)
                for t, law in enumerate(laws, start=2)
            )
            assert slack <= 1e-12
            shipped = _mallows_shipped(page, m, eps, laws)
            assert abs(shipped - eps) <= slack + FLOAT_TOL * max(1, eps), (m, eps, shipped, slack)


#: Counts of the events for both mechanisms, from the module at ``url``.
DRAW = """async ([url, n, eps, m]) => {
    const { randomizeComparison, mallowsPrivatize } = await import(url);
    const counts = { rr1: 0, rr0: 0, mallows1: 0, mallows0: 0 };
    for (let k = 0; k < n; k++) {
        if (randomizeComparison({ a: "a", b: "b", winner: "a" }, eps).winner === "a") counts.rr1++;
        if (randomizeComparison({ a: "a", b: "b", winner: "b" }, eps).winner === "a") counts.rr0++;
    }
    const sigma = Array.from({ length: m }, (_, k) => k);
    const moved = sigma.slice(1).concat([0]);
    for (let k = 0; k < n; k++) {
        if (mallowsPrivatize(sigma, eps)[0] === 0) counts.mallows1++;
        if (mallowsPrivatize(moved, eps)[0] === 0) counts.mallows0++;
    }
    return counts;
}"""

EPS, M = 1.0, 5


def _draw(page, url: str, n: int) -> dict:
    before = random_values_calls(page)
    counts = page.evaluate(DRAW, [url, n, EPS, M])
    # One crypto.getRandomValues call per uniform: 2n for the answers, 2n·2(m − 1) for rankings.
    assert random_values_calls(page) - before == 2 * n + 4 * n * (M - 1)
    return counts


def _audits(counts: dict, n: int) -> None:
    audit(counts["rr1"], n, counts["rr0"], n, EPS)
    audit(counts["mallows1"], n, counts["mallows0"], n, EPS)


def test_privrank_js_audit(server, new_page):
    """10⁶ draws per input and mechanism in the page: ε_lower ≤ 1 ≤ ε_upper for both."""
    page = new_page()
    page.goto(server.base + "/")
    n = 1_000_000
    _audits(_draw(page, "/static/privrank.js", n), n)


MUTANTS = {
    "flip probability doubled": ("return t / (1 + t);", "return (2 * t) / (1 + t);", "noisier"),
    "Mallows dispersion doubled": (
        "const b = epsilon / (m - 1);",
        "const b = (2 * epsilon) / (m - 1);",
        "exceeds",
    ),
}


@pytest.mark.parametrize("name", list(MUTANTS))
def test_privrank_js_audit_rejects_a_mutant(server, new_page, name):
    """privrank.js with one line changed, served at another path of the same origin."""
    find, replace, side = MUTANTS[name]
    source = httpx2.get(server.base + "/static/privrank.js").text
    assert source.count(find) == 1
    page = new_page()
    page.route(
        "**/static/privrank-mutant.js",
        lambda route: route.fulfill(
            status=200, content_type="text/javascript", body=source.replace(find, replace)
        ),
    )
    page.goto(server.base + "/")
    n = 100_000
    with pytest.raises(AuditError, match=side):
        _audits(_draw(page, "/static/privrank-mutant.js", n), n)
