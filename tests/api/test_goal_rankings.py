"""GET …/ranking and …/pairwise of surveys whose answers all (or all but one) agree.

Respondents who answer truthfully but send their answers as already privatized
(``privatized: true``, ε = 2: the server stores them as they are) give every pair a mean
debiased value z̄ = e²/(e² − 1) ≈ 1.157 > 1. The unpenalized objective then has no
minimizer (docs/estimator.md §4.3): only the ridge holds the fit, its scores grow
linearly in the answers, and σ' underflows between the items once there are a few dozen
answers per pair. The ranking is still the debiased regularized MLE, in the true order;
the intervals are unavailable (``not_identified``, docs/uncertainty.md §5). Goal surveys
with adaptive assignment reach such data first (their answers concentrate on a few
pairs), plain surveys the same way with more answers; both are covered.
"""

from __future__ import annotations

import pytest

from tests.helpers.api import ADMIN, register

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ORDER = ("A", "B", "C", "D")  # the true order, best first
PAIRS = [(a, b) for k, a in enumerate(ORDER) for b in ORDER[k + 1 :]]
EPSILON = 2.0

SURVEYS = {
    "goal top 1": {"assignment": "adaptive", "goal": {"top_k": 1, "level": 0.9}},
    "goal top 2, pairwise": {
        "assignment": "adaptive",
        "goal": {"top_k": 2, "level": 0.9, "certificate": "pairwise"},
    },
    "plain": {},
}


def _create(client, kind: str) -> tuple[str, dict[str, str]]:
    # Each respondent answers all 6 pairs at ε = 2: a cap of 12.
    privacy = {"epsilon_default": EPSILON, "respondent_budget": len(PAIRS) * EPSILON}
    body = {"title": kind, "items": list(ORDER), "privacy": privacy, **SURVEYS[kind]}
    r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    survey = r.json()
    return survey["id"], {item["label"]: item["id"] for item in survey["items"]}


def _check_ranking(
    client, sid: str, ids: dict[str, str], query: str = "", reason: str = "not_identified"
) -> None:
    """Both endpoints answer 200: the scores in the true order, the intervals refused
    (``reason``: why)."""
    r = client.get(f"/v1/surveys/{sid}/ranking{query}", headers=ADMIN)
    assert r.status_code == 200, r.text
    ranking = r.json()
    assert [item["label"] for item in sorted(ranking["items"], key=lambda x: x["rank"])] == list(ORDER)
    assert ranking["diagnostics"]["converged"]
    u = ranking["uncertainty"]
    assert u["available"] is False and u["reason"] == reason, u
    assert all(item["se"] is None and item["ci"] is None for item in ranking["items"])
    r = client.get(f"/v1/surveys/{sid}/pairwise", headers=ADMIN)
    assert r.status_code == 200, r.text
    pairwise = r.json()
    assert pairwise["available"] is False and pairwise["reason"] == reason, pairwise["reason"]
    index = {item["item_id"]: k for k, item in enumerate(pairwise["items"])}
    for a, b in PAIRS:
        assert pairwise["probability"][index[ids[a]]][index[ids[b]]] > 0.5


@pytest.mark.parametrize("dissent", [False, True], ids=["consistent", "one dissent"])
@pytest.mark.parametrize("kind", list(SURVEYS))
def test_consistent_privatized_answers_rank_without_intervals(client, kind, dissent):
    """60 respondents answer all six pairs in the true order, sent as privatized at ε = 2
    (with ``dissent``, the first one reverses A–B): 60 answers per pair, enough for σ' to
    underflow at the ridge-removal step's point. Once no response was an HTTP 500 there."""
    sid, ids = _create(client, kind)
    for r in range(60):
        _, headers = register(client, sid)
        comparisons = [
            {"a": ids[a], "b": ids[b], "winner": ids[b if dissent and r == 0 and (a, b) == ("A", "B") else a]}
            for a, b in PAIRS
        ]
        body = {"privatized": True, "epsilon": EPSILON, "comparisons": comparisons}
        response = client.post(f"/v1/surveys/{sid}/responses", json=body, headers=headers)
        assert response.status_code == 201, response.text
    _check_ranking(client, sid, ids)


def test_many_consistent_privatized_answers_rank_without_intervals(client):
    """600 respondents' consistent answers (imported as privatized at ε = 2) agree far more
    often than randomized response at ε = 2 allows: whatever covariance or bootstrap is
    asked for, the intervals are refused for that reason (and the ridge fit itself has
    moved so far that σ' underflows at θ̂)."""
    sid, ids = _create(client, "goal top 1")
    lines = ["respondent,item_a,item_b,winner,epsilon"]
    lines += [f"r{r},{a},{b},{a},{EPSILON}" for r in range(600) for a, b in PAIRS]
    r = client.post(
        f"/v1/surveys/{sid}/comparisons/import?privatized=true",
        content=("\n".join(lines) + "\n").encode(),
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    unrandomized = "unrandomized_answers"
    _check_ranking(client, sid, ids, reason=unrandomized)
    _check_ranking(client, sid, ids, "?covariance=model", reason=unrandomized)
    _check_ranking(
        client, sid, ids, "?uncertainty=bootstrap&covariance=model&replicates=50", reason=unrandomized
    )
