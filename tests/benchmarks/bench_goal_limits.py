"""Why a large top set misses the 2× target: two other designs for K = 10 of 30.

    python -m tests.benchmarks.bench_goal_limits            # 4 surveys per cell (~5 min)
    python -m tests.benchmarks.bench_goal_limits --runs 10

With the top 10 of 30 *separated* (bench_adaptive's profile), adaptive assignment with
the Borda certificate needs about 1.7× fewer answers than balanced, and the pairwise
certificate more than balanced (docs/uncertainty.md §9). This prints, in the same run
and with the same simulated respondents (level 0.95, checks every max(m, 50) answers
or 2% of the answers so far), the answers two other designs need:

* *oracle reference* — a Borda score against a fixed reference set of opponents, the
  true K-th and (K+1)-th items, known in advance (which no real survey knows): each
  item in doubt is compared with a uniformly drawn reference item, and the certificate
  is the Borda one on those scores (any fixed opponent distribution orders items as θ
  under BTL). Its saving bounds what choosing the opponents could gain.
* *stages* — adaptive Borda that, each time the items in doubt fall to half of the
  items it is certifying among, starts a fresh Borda certificate among those items
  only (where the score gaps are wider and both items of a pair count), at α/2^s for
  stage s; earlier stages' certified items are kept.

Both are prototypes for this measurement only, not served.

``--bound`` prints, instead, what *any* design could save at best (asymptotically, as
the level → 1): the characteristic time T*(θ) of top-K identification
[Garivier & Kaufmann 2016, Theorem 1], with
each pair an arm whose answers are Bernoulli with mean q = q₀ + (1 − 2q₀)·σ(θ_a − θ_b)
(randomized response, q₀ = 1/(1 + e^ε)):

    1/T*(θ) = sup_w inf_{λ ∈ Alt(θ)} Σ_p w_p · kl(q_p(θ), q_p(λ)),

Alt(θ) the BTL scores with another top K (λ_j ≥ λ_i for some i in it, j outside).
Any procedure that is right with probability ≥ 1 − δ needs at least T*·kl(δ, 1 − δ)
answers on average; one restricted to uniform pairs (w_p = 1/C(m, 2)) needs
T_unif·kl(δ, 1 − δ), where 1/T_unif is the inner infimum at uniform w. T_unif / T* is
the most any choice of pairs can save. The infimum is computed per (i, j) on the
boundary λ_i = λ_j (L-BFGS from θ with λ_i, λ_j moved to their midpoint; a local
optimum, so 1/T is an upper bound in principle) and the supremum by cutting planes
(Kelley's method: a linear programme over w with one cut per alternative found);
the ratio is printed as [lower, upper] from the best w found and the programme's value.

It then measures how far a certificate on the BTL likelihood itself gets with that
optimal w known in advance (an oracle): pairs drawn i.i.d. from w, and the plug-in
e-process of universal inference [Wasserman, Ramdas & Balakrishnan 2020]
E_n(λ) = Π_t p(y_t | θ̂_{t−1}) / p(y_t | λ) — θ̂ a ridge fit to the answers before
each batch, so E_n(θ) is a nonnegative martingale with mean 1 at the true θ, whatever
pairs are drawn, and Ville's inequality makes {λ : E_n(λ) < 1/δ} a confidence
sequence. The top K is certified when every λ with another top K has E_n(λ) ≥ 1/δ,
i.e. when Σ_t log p(y_t | θ̂_{t−1}) − sup_Alt ℓ_n ≥ log(1/δ). The sup is taken by local
optimisation over λ_i = λ_j for the K items in the fit's top and the 6 nearest outside
— both can only make the prototype stop sooner than a valid one, so its answers are a
lower bound for this construction. The price is the plug-in's regret against the
best fit in hindsight, ℓ_n(θ̂_n) − Σ_t log p(y_t | θ̂_{t−1}), about (m − 1)/2 · log n
nats, which the stop must beat besides log(1/δ) = 3.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.optimize import linprog, minimize
from scipy.special import expit

from app.stats.adaptive import (
    BordaSequences,
    draw_for_respondents,
    goal_status,
    simulate_goal,
    simulated_answers,
)
from app.stats.laplacian import laplacian
from app.stats.mechanisms import debias, flip_probability, privatize, rr_probability
from tests.benchmarks.bench_adaptive import LEVEL, profile


def oracle_reference(theta, eps, k, reference, rng, cap) -> tuple[int, set | None]:
    """Items in doubt against a uniformly drawn item of ``reference`` (P(i beats i) = ½)."""
    m = theta.size
    seqs = BordaSequences(m)
    status = goal_status(seqs, LEVEL, k)
    used = 0
    while not status.met and used < cap:
        step = max(max(m, 50), used // 50)
        i = rng.choice(np.flatnonzero(status.active), size=step)
        opp = np.asarray(reference)[rng.integers(0, len(reference), size=step)]
        y = (rng.random(step) < 1.0 / (1.0 + np.exp(theta[opp] - theta[i]))).astype(np.int8)
        z = debias(privatize(y, eps, rng), eps)
        z[opp == i] = 0.5  # an item against itself: exactly ½
        seqs.add(i, np.where(opp == i, (i + 1) % m, opp), z, eps, True, False)
        used += step
        status = goal_status(seqs, LEVEL, k, previous=status)
    return used, set(status.certified.tolist()) if status.met else None


def stages(theta, eps, k, rng, cap, pairs=10) -> tuple[int, set | None]:
    """Adaptive Borda restarted among the items in doubt whenever they halve."""
    universe, top, used, stage, inside = np.arange(theta.size), k, 0, 1, []
    while 0 < top < universe.size:
        n, level = universe.size, 1.0 - (1.0 - LEVEL) / 2**stage
        seqs = BordaSequences(n)
        status = goal_status(seqs, level, top)
        while not status.met and used < cap and not 2 <= status.active.sum() <= n // 2:
            step = max(max(theta.size, 50), used // 50)
            per = max(1, min(pairs, int(status.active.sum()) // 2))
            i, j, ci, cj, who = draw_for_respondents(status.active, -(-step // per), pairs, rng)
            z = simulated_answers(theta[universe], i, j, who, int(who.max()) + 1, eps, 0.0, rng)
            seqs.add(i, j, z, eps, ci, cj)
            used += i.size
            status = goal_status(seqs, level, top, previous=status)
        inside += universe[status.certified].tolist()
        if status.met or used >= cap:
            return used, set(inside) if status.met else None
        top -= status.certified.size
        universe, stage = universe[status.active], stage + 1
    return used, set(inside + (universe.tolist() if top else []))


def _kl(lam, a, b, q0, q1):
    """kl(q1_p, q_p(λ)) for every pair and its derivative in λ_a − λ_b."""
    s = expit(lam[a] - lam[b])
    q = q0 + (1.0 - 2.0 * q0) * s
    kl = q1 * np.log(q1 / q) + (1.0 - q1) * np.log((1.0 - q1) / (1.0 - q))
    return kl, (-q1 / q + (1.0 - q1) / (1.0 - q)) * s * (1.0 - s) * (1.0 - 2.0 * q0)


def _minimize_tied(objective, start, tie=None):
    """argmin over λ of ``objective(λ) -> (value, gradient)``, with λ_i = λ_j when tie = (i, j)
    (λ_j is dropped from the variables and its gradient added to λ_i's)."""
    m = start.size
    i, j = tie if tie else (0, None)
    keep = np.delete(np.arange(m), j) if tie else np.arange(m)

    def full(u):
        lam = np.empty(m)
        lam[keep] = u
        if tie:
            lam[j] = lam[i]
        return lam

    def f(u):
        value, grad = objective(full(u))
        if tie:
            grad[i] += grad[j]
        return value, grad[keep]

    options = {"maxiter": 1000, "gtol": 1e-10}
    return full(minimize(f, start[keep], jac=True, method="L-BFGS-B", options=options).x)


def closest_alternative(theta, w, i, j, eps) -> tuple[float, np.ndarray]:
    """min Σ w_p kl(q_p(θ), q_p(λ)) over λ with λ_i = λ_j; the value and kl per pair."""
    a, b = np.triu_indices(theta.size, 1)
    q0, q1 = float(flip_probability(eps)), rr_probability(theta[a], theta[b], eps)

    def objective(lam):
        kl, dkl = _kl(lam, a, b, q0, q1)
        return float(w @ kl), np.bincount(a, w * dkl, lam.size) - np.bincount(b, w * dkl, lam.size)

    start = theta.copy()
    start[i] = start[j] = 0.5 * (theta[i] + theta[j])
    kl = _kl(_minimize_tied(objective, start, (i, j)), a, b, q0, q1)[0]
    return float(w @ kl), kl


def characteristic_ratio(theta, k, eps, rounds=40, tol=2e-3) -> dict:
    """T_unif / T* for the top ``k`` of ``theta`` (see the module's docstring)."""
    m = theta.size
    pairs = m * (m - 1) // 2
    order = np.argsort(-theta)
    swaps = [(i, j) for i in order[:k] for j in order[k:]]

    def inner(w):
        return sorted((closest_alternative(theta, w, i, j, eps) for i, j in swaps), key=lambda r: r[0])

    uniform = np.full(pairs, 1.0 / pairs)
    found = inner(uniform)
    at_uniform = best = found[0][0]
    best_w, cuts, upper = uniform, [kl for _, kl in found[:40]], np.inf
    for _ in range(rounds):
        lp = linprog(
            np.append(np.zeros(pairs), -1.0),
            A_ub=np.array([np.append(-c, 1.0) for c in cuts]),
            b_ub=np.zeros(len(cuts)),
            A_eq=np.append(np.ones(pairs), 0.0)[None, :],
            b_eq=[1.0],
            bounds=[(0, None)] * pairs + [(None, None)],
            method="highs",
        )
        upper = -lp.fun
        w = 0.5 * lp.x[:pairs] + 0.5 * best_w  # damped: plain Kelley steps oscillate
        found = inner(w)
        if found[0][0] > best:
            best, best_w = found[0][0], w
        cuts += [kl for _, kl in found[:10]]
        if upper - best < tol * upper:
            break
    a, b = np.triu_indices(m, 1)
    top = np.isin(a, order[:k]).astype(int) + np.isin(b, order[:k])
    return {
        "lower": best / at_uniform,
        "upper": upper / at_uniform,
        "shares": [float(best_w[top == t].sum()) for t in (2, 1, 0)],  # inside, across, outside
        "w": best_w,
        "per_answer": best,
        "per_answer_uniform": at_uniform,
        "per_answer_bound": upper,  # the programme's value: no design gets more evidence per answer
    }


def _loglik(lam, a, b, n1, n0, q0, ridge=0.0):
    """RR-BTL log-likelihood of the answer counts (n1: a won, n0: b won) and its gradient."""
    s = expit(lam[a] - lam[b])
    q = q0 + (1.0 - 2.0 * q0) * s
    d = (n1 / q - n0 / (1.0 - q)) * s * (1.0 - s) * (1.0 - 2.0 * q0)
    grad = np.bincount(a, d, lam.size) - np.bincount(b, d, lam.size) - ridge * lam
    return float(n1 @ np.log(q) + n0 @ np.log(1.0 - q) - 0.5 * ridge * lam @ lam), grad


def _fit(a, b, n1, n0, q0, start, ridge=0.0, tie=None):
    """argmax of the log-likelihood (ridge-penalised), optionally with λ_i = λ_j (tie=(i, j))."""

    def objective(lam):
        value, grad = _loglik(lam, a, b, n1, n0, q0, ridge)
        return -value, -grad

    return _minimize_tied(objective, start, tie)


def oracle_likelihood(theta, k, eps, w, rng, delta=1 - LEVEL, cap=400_000) -> tuple:
    """Answers the plug-in likelihood certificate needs with pairs drawn from ``w``; its regret."""
    m = theta.size
    a, b = np.triu_indices(m, 1)
    q0, truth = float(flip_probability(eps)), rr_probability(theta[a], theta[b], eps)
    n1, n0 = np.zeros(a.size), np.zeros(a.size)
    predicted, hat, used, check = 0.0, np.zeros(m), 0, 2 * m * m
    while used < cap:
        batch = min(200, max(10, used // 50))  # small batches while the predictor is poor
        p = rng.choice(a.size, size=batch, p=w)
        y = rng.random(batch) < truth[p]
        q = q0 + (1.0 - 2.0 * q0) * expit(hat[a[p]] - hat[b[p]])
        predicted += float(np.sum(np.where(y, np.log(q), np.log(1.0 - q))))
        np.add.at(n1, p, y)
        np.add.at(n0, p, ~y)
        used += batch
        hat = _fit(a, b, n1, n0, q0, hat, ridge=1.0)  # the next batch's predictor
        if used >= check:
            check = int(used * 1.02)
            mle = _fit(a, b, n1, n0, q0, hat)
            order = np.argsort(-mle)
            best_alt = max(
                _loglik(_fit(a, b, n1, n0, q0, mle, tie=(i, j)), a, b, n1, n0, q0)[0]
                for i in order[:k]
                for j in order[k : k + 6]
            )
            if predicted - best_alt >= np.log(1.0 / delta):
                return used, _loglik(mle, a, b, n1, n0, q0)[0] - predicted
    return None, None


def mixture_regret(theta, eps, w, n, prior=1.0) -> float:
    """Laplace's approximation to a N(0, prior·I) mixture's regret after n answers drawn
    from w: ½ log det(I + prior·H) + ½‖θ‖²/prior on the scores' sum-zero subspace, H the
    Fisher information of the answers."""
    m = theta.size
    a, b = np.triu_indices(m, 1)
    q0, q = float(flip_probability(eps)), rr_probability(theta[a], theta[b], eps)
    s = expit(theta[a] - theta[b])
    info = n * w * ((1.0 - 2.0 * q0) * s * (1.0 - s)) ** 2 / (q * (1.0 - q))
    h = laplacian(m, a, b, info)
    basis = np.linalg.qr(np.eye(m) - 1.0 / m)[0][:, : m - 1]
    centred = basis.T @ theta
    return (
        0.5 * np.linalg.slogdet(np.eye(m - 1) + prior * basis.T @ h @ basis)[1]
        + 0.5 * centred @ centred / prior
    )


def bound(cells, runs) -> None:
    print("most any design can save (T_unif / T*, BTL answers with randomized response)")
    print(
        f"{'m':>3} {'K':>3} {'eps':>4}  {'T_unif / T*':>15}  optimal w: inside / across / outside the top K"
    )
    for m, k, eps in cells:
        r = characteristic_ratio(profile(m, k, "separated"), k, eps)
        shares = " / ".join(f"{s:.2f}" for s in r["shares"])
        print(f"{m:3d} {k:3d} {eps:4.1f}  [{r['lower']:5.2f}, {r['upper']:5.2f}]  {shares}", flush=True)
        if (m, k) == (30, 10) and eps >= 1.0:
            theta, w = profile(m, k, "separated"), np.maximum(r["w"], 0.0)
            seeds = [np.random.default_rng([m, k, int(10 * eps), s]) for s in range(runs)]
            balanced = np.mean(
                [
                    simulate_goal(theta, eps, LEVEL, "balanced", g, top_k=k, max_answers=40_000 * m).answers
                    for g in seeds
                ]
            )
            found = [
                oracle_likelihood(
                    theta, k, eps, w / w.sum(), np.random.default_rng([m, k, int(10 * eps), s, 2])
                )
                for s in range(runs)
            ]
            used = [n for n, _ in found if n is not None]
            regret = np.mean([g for n, g in found if n is not None])
            mean = f"{np.mean(used):.0f}, {balanced / np.mean(used):.2f}×" if used else "none"
            evidence, regret_2x = (
                balanced / 2 * r["per_answer_bound"],
                mixture_regret(theta, eps, w / w.sum(), balanced / 2),
            )
            print(
                f"{'':15}at half balanced's answers: evidence n/T* ≤ {evidence:.0f} nats;"
                f" a Bayes mixture's regret ≈ {regret_2x:.0f} nats",
                flush=True,
            )
            print(
                f"{'':15}balanced (Borda) {balanced:.0f}; likelihood certificate with the optimal w known:"
                f" {mean} ({len(used)} of {runs} met within 400,000), plug-in regret {regret:.0f} nats",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--bound", action="store_true", help="print T_unif / T* instead (~10 min)")
    args = parser.parse_args()
    if args.bound:
        bound(
            [(10, 3, 1.0), (10, 3, 2.0), (30, 3, 1.0), (30, 10, 0.5), (30, 10, 1.0), (30, 10, 2.0)], args.runs
        )
        return
    m, k = 30, 10
    theta, truth, cap = profile(m, k, "separated"), set(range(k)), 40_000 * m
    print(f"m = {m}, top {k}, separated; level {LEVEL}; {args.runs} surveys per design")
    print(f"{'eps':>4} {'balanced':>9}  {'Borda adaptive':>15}  {'oracle reference':>17}  {'stages':>15}")
    for eps in (1.0, 2.0):
        seeds = [np.random.default_rng([m, k, int(10 * eps), r]) for r in range(args.runs)]
        balanced = np.mean(
            [simulate_goal(theta, eps, LEVEL, "balanced", s, top_k=k, max_answers=cap).answers for s in seeds]
        )
        cells = []
        for design in ("adaptive", "oracle", "stages"):
            runs = []
            for r in range(args.runs):
                rng = np.random.default_rng([m, k, int(10 * eps), r, 1])
                if design == "adaptive":
                    run = simulate_goal(theta, eps, LEVEL, "adaptive", rng, top_k=k, max_answers=cap)
                    runs.append(
                        (run.answers, set(run.certified.tolist()) if run.certified is not None else None)
                    )
                elif design == "oracle":
                    runs.append(oracle_reference(theta, eps, k, [k - 1, k], rng, cap))
                else:
                    runs.append(stages(theta, eps, k, rng, cap))
            wrong = sum(c is not None and c != truth for _, c in runs)
            mean = np.mean([u for u, _ in runs])
            cells.append(f"{mean:7.0f} {balanced / mean:4.2f}× {wrong}✗")
        print(f"{eps:4.1f} {balanced:9.0f}  " + "  ".join(f"{c:>15}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
