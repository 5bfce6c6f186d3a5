"""Goals, adaptive assignment and the certified stop through the REST API.

Virtual respondents (each its own registration, answering the pairs the server serves
with its tickets, from a BTL population, randomized on the server) answer until
``goal.met``; the certified set must be the true top-K. Then the guarantees the
certificate rests on: tickets are bound to their pair and respondent, answers without
a ticket count for nothing, a respondent counts once per item, and adding items
restarts the count.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.analysis.aggregation import fold_pending
from app.core.db.models import SurveyStats
from app.goals.service import GoalSpec, GoalState
from tests.helpers.api import ADMIN, register

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _create(client, items, epsilon=2.0, **extra) -> dict:
    # No cap, explicitly (every pair at the survey's ε may cost more than the largest cap):
    # these tests are about the goal.
    privacy = {"epsilon_default": epsilon, "respondent_budget": "unlimited"}
    body = {"title": "goal", "items": list(items), "privacy": privacy, **extra}
    r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()


def _answer_until_met(client, survey, theta, rng, per_respondent=8, max_respondents=3000):
    """Respondents answer the pairs they are served (true answers from BTL with ``theta``
    by item label) until the goal is met; the answers and respondents used, and the goal.

    The goal is read when the pairs served stop carrying tickets (served from a goal
    state that is met) or the survey stops taking respondents or answers (closed by its
    goal), and every 50 respondents besides."""
    sid = survey["id"]
    answers = 0

    def goal():
        return client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["goal"]

    for n in range(1, max_respondents + 1):
        r = client.post(f"/v1/surveys/{sid}/respondents", json={})
        if r.status_code == 409:  # closed by its goal
            break
        assert r.status_code == 201, r.text
        headers = {"Authorization": f"Bearer {r.json()['token']}"}
        r = client.get(f"/v1/surveys/{sid}/pairs?count={per_respondent}", headers=headers)
        assert r.status_code == 200, r.text
        pairs = r.json()["pairs"]
        if not pairs or any(p["ticket"] is None for p in pairs):
            g = goal()
            if g["met"]:
                return answers, n, g
        if not pairs:
            continue
        comparisons = []
        for p in pairs:
            d = theta[p["a_label"]] - theta[p["b_label"]]
            winner = p["a"] if rng.random() < 1 / (1 + np.exp(-d)) else p["b"]
            comparisons.append({"a": p["a"], "b": p["b"], "winner": winner, "ticket": p["ticket"]})
        r = client.post(
            f"/v1/surveys/{sid}/responses",
            json={"privatized": False, "comparisons": comparisons},
            headers=headers,
        )
        if r.status_code == 409 and "closed" in r.text:  # closed by its goal since the pairs were served
            break
        assert r.status_code == 201, r.text
        answers += len(comparisons)
        if n % 50 == 0:
            g = goal()
            if g["met"]:
                return answers, n, g
    return answers, n, goal()


@pytest.mark.slow
@pytest.mark.parametrize(("assignment", "close_when_met"), [("adaptive", True), ("balanced", False)])
def test_virtual_respondents_until_goal_met(client, assignment, close_when_met):
    """A separated top 2 of 8 items at ε = 4, 8 pairs asked per respondent: the goal is
    met, the certified set is the true top 2, and the answers the certificate counted
    are what GET survey says. Then the survey closes itself and thanks (close_when_met),
    or stays open with its goal met."""
    labels = [f"item {k}" for k in range(8)]
    theta = dict(zip(labels, [6.0, 5.0, -2.0, -2.0, -2.0, -2.0, -2.0, -2.0], strict=True))
    goal = {"top_k": 2, "level": 0.9, "close_when_met": close_when_met}
    survey = _create(client, labels, epsilon=4.0, assignment=assignment, goal=goal)
    assert survey["assignment"] == assignment
    assert survey["goal"] | {"met": None} == {
        "top_k": 2,
        "full_ranking": False,
        "level": 0.9,
        "close_when_met": close_when_met,
        "certificate": "borda",
        "estimand": "borda_top_k",
        "estimand_text": "The Borda top 2, certified at 90%: the 2 items with the highest chance of being "
        "preferred to an item drawn at random from the others.",
        "met": None,
        "items": None,
        "answers_used": 0,
        "counted_answers": 0,
        "resolved": 0,
        "n_items": 8,
        "unreachable": False,
    }
    answers, _, goal = _answer_until_met(client, survey, theta, np.random.default_rng(5))
    assert goal["met"], goal
    by_id = {i["id"]: i["label"] for i in survey["items"]}
    assert {by_id[x] for x in goal["items"]} == {"item 0", "item 1"}
    assert goal["answers_used"] == answers
    assert goal["resolved"] == 8
    assert 0 < goal["counted_answers"] <= 2 * answers
    sid = survey["id"]
    again = client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()
    assert again["goal"]["met"]  # once met, it stays met
    public = client.get(f"/v1/surveys/{sid}/public").json()
    assert public["goal_met"] is True
    if close_when_met:
        assert again["status"] == "closed" and public["status"] == "closed"
        assert client.post(f"/v1/surveys/{sid}/respondents", json={}).status_code == 409
    else:
        assert again["status"] == "open" and public["status"] == "open"
        _, h = register(client, sid)
        assert all(p["ticket"] is None for p in _served(client, sid, h, 3))  # served as without a goal


def _served(client, sid, headers, count):
    r = client.get(f"/v1/surveys/{sid}/pairs?count={count}", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["pairs"]


def _state(app, sid) -> GoalState:
    with app.state.session_factory() as session:
        fold_pending(session, sid)
        stats = session.get(SurveyStats, sid)
        from app.core.db.models import Survey

        goal = GoalSpec.of(session.get(Survey, sid))
        return GoalState.unpack(stats.goal_state, goal)


def test_tickets_bind_pair_and_respondent(client, app, unchanged):
    survey = _create(client, "abcdef", assignment="adaptive", goal={"top_k": 2})
    sid = survey["id"]
    _, h1 = register(client, sid)
    _, h2 = register(client, sid)
    p1 = _served(client, sid, h1, 3)
    p2 = _served(client, sid, h2, 3)
    assert all(p["ticket"] for p in p1)  # a fresh respondent's first pairs all count
    # Another respondent's ticket, or a ticket moved to another pair: 422, nothing stored.
    foreign = {"a": p1[0]["a"], "b": p1[0]["b"], "winner": p1[0]["a"], "ticket": p2[0]["ticket"]}
    moved = {"a": p2[1]["a"], "b": p2[1]["b"], "winner": p2[1]["a"], "ticket": p2[0]["ticket"]}
    forged = {"a": p1[0]["a"], "b": p1[0]["b"], "winner": p1[0]["a"], "ticket": "6.3.AAAAAAAAAAAAAAAAAAAAAA"}
    with unchanged():
        for bad, headers in ((foreign, h1), (moved, h2), (forged, h1)):
            r = client.post(
                f"/v1/surveys/{sid}/responses",
                json={"privatized": False, "comparisons": [bad]},
                headers=headers,
            )
            assert r.status_code == 422, r.text
            assert "ticket" in r.json()["detail"]


def test_only_ticketed_first_answers_count(client, app):
    """Answers without a ticket are stored but not counted; a respondent counts once per item."""
    survey = _create(client, "abcdef", goal={"top_k": 2})  # balanced with a goal
    sid = survey["id"]
    ids = [i["id"] for i in survey["items"]]
    _, h = register(client, sid)
    r = client.post(
        f"/v1/surveys/{sid}/responses",
        json={"privatized": False, "comparisons": [{"a": ids[0], "b": ids[1], "winner": ids[0]}]},
        headers=h,
    )
    assert r.status_code == 201
    state = _state(app, sid)
    assert state.answers == 1 and state.counted == 0
    # This respondent has answered about items 0 and 1: its pairs never count for them.
    pairs = _served(client, sid, h, 10)
    pos = {x: k for k, x in enumerate(ids)}
    comparisons = [{"a": p["a"], "b": p["b"], "winner": p["a"], "ticket": p["ticket"]} for p in pairs]
    r = client.post(
        f"/v1/surveys/{sid}/responses", json={"privatized": False, "comparisons": comparisons}, headers=h
    )
    assert r.status_code == 201, r.text
    state = _state(app, sid)
    counted = state.seqs.answers
    assert counted[pos[ids[0]]] == 0 and counted[pos[ids[1]]] == 0
    assert counted.max() <= 1  # one counted answer per respondent and item
    assert counted.sum() == 4  # items 2..5, each once
    # The same respondent has answered about every item: it is thanked, not asked more.
    r = client.get(f"/v1/surveys/{sid}/pairs?count=3", headers=h)
    assert r.json()["pairs"] == [] and r.json()["reason"] == "not_needed"


def test_stale_ticket_counts_once(client, app):
    """Two GETs before answering flag the same item twice; only the first stored answer
    about it counts."""
    survey = _create(client, "abcd", assignment="adaptive", goal={"top_k": 1})
    sid = survey["id"]
    _, h = register(client, sid)
    first = _served(client, sid, h, 2)
    second = _served(client, sid, h, 2)
    for batch in (first, second):
        comparisons = [{"a": p["a"], "b": p["b"], "winner": p["b"], "ticket": p["ticket"]} for p in batch]
        # A pair served twice is answered once.
        done = {frozenset((c["a"], c["b"])) for c in first} if batch is second else set()
        comparisons = [c for c in comparisons if frozenset((c["a"], c["b"])) not in done]
        if comparisons:
            r = client.post(
                f"/v1/surveys/{sid}/responses",
                json={"privatized": False, "comparisons": comparisons},
                headers=h,
            )
            assert r.status_code == 201, r.text
    assert _state(app, sid).seqs.answers.max() == 1


def test_adding_items_restarts_the_count(client, app):
    survey = _create(client, "abcd", assignment="adaptive", goal={"top_k": 1})
    sid = survey["id"]
    _, h = register(client, sid)
    pairs = _served(client, sid, h, 2)
    r = client.post(f"/v1/surveys/{sid}/items", json={"items": ["e"]}, headers=ADMIN)
    assert r.status_code == 201, r.text
    comparisons = [{"a": p["a"], "b": p["b"], "winner": p["a"], "ticket": p["ticket"]} for p in pairs]
    r = client.post(
        f"/v1/surveys/{sid}/responses", json={"privatized": False, "comparisons": comparisons}, headers=h
    )
    assert r.status_code == 201, r.text
    goal = client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["goal"]
    assert goal["n_items"] == 5 and goal["counted_answers"] == 0 and goal["answers_used"] == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"assignment": "adaptive"}, "goal"),
        ({"goal": {"top_k": 4}}, "top_k"),
        ({"goal": {"top_k": 1, "full_ranking": True}}, "either"),
        ({"goal": {}}, "either"),
        ({"goal": {"top_k": 1, "level": 0.3}}, "level"),
        ({"goal": {"full_ranking": True, "level": 1.0}}, "level"),
        ({"assignment": "sideways"}, "assignment"),
        (
            {
                "goal": {"top_k": 1},
                "privacy": {"model": "central", "total_budget": 1, "max_comparisons_per_respondent": 2},
            },
            "central",
        ),
        ({"goal": {"top_k": 1}, "kind": "ranking"}, "pairwise"),
    ],
)
def test_bad_goals_are_refused(client, unchanged, extra, message):
    body = {"title": "t", "items": ["a", "b", "c", "d"], **extra}
    with unchanged():
        r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 422, r.text
    assert message in str(r.json()["detail"])


def test_surveys_without_goal_are_unchanged(client):
    survey = _create(client, "abc")
    assert survey["assignment"] == "balanced" and survey["goal"] is None
    _, h = register(client, survey["id"])
    assert all(p["ticket"] is None for p in _served(client, survey["id"], h, 3))
    listed = client.get("/v1/surveys?limit=1000", headers=ADMIN).json()["surveys"]
    assert any(s["id"] == survey["id"] and s["goal"] is None for s in listed)


def test_goal_planner_compares_the_strategies(client):
    """The planner of adaptive designs: a top 1 of 8 with a runner-up and six items far
    below (resolved early) at ε = 2 meets its goal in every simulated survey under both
    strategies, with fewer answers adaptively (which then asks about two items only)."""
    r = client.get(
        "/v1/plan/goal",
        params={
            "items": 8,
            "top_k": 1,
            "epsilon": 2.0,
            "level": 0.9,
            "scores": "3,1,-2,-2,-2,-2,-2,-2",
            "replications": 4,
        },
        headers=ADMIN,
    )
    assert r.status_code == 200, r.text
    plan = r.json()
    assert plan["adaptive"]["met"] == plan["balanced"]["met"] == 4
    assert plan["saving"] == pytest.approx(
        plan["balanced"]["answers_mean"] / plan["adaptive"]["answers_mean"]
    )
    assert plan["saving"] > 1 and plan["saving_reason"] is None
    assert plan["scores"] == "the pilot scores given"
    # Close scores at a small ε within 100 answers: neither strategy meets the goal, no saving, and why.
    short = client.get(
        "/v1/plan/goal",
        params={
            "items": 8,
            "top_k": 1,
            "epsilon": 0.5,
            "level": 0.9,
            "scores": "0.2,0.1,0,0,0,0,0,0",
            "replications": 4,
            "max_answers": 100,
        },
        headers=ADMIN,
    )
    assert short.status_code == 200, short.text
    short = short.json()
    assert short["adaptive"]["met"] < 4 and short["saving"] is None
    assert short["saving_reason"] == (
        f"Not every simulated survey met the goal within max_answers = 100: adaptive assignment met it in "
        f"{short['adaptive']['met']} of 4, balanced assignment in {short['balanced']['met']} of 4, so there "
        "is no ratio of the answers each needs. Raise max_answers, or ask for less (a lower level, a "
        "smaller top_k, or a larger ε)."
    )
    for bad in ({"items": 8, "top_k": 8}, {"items": 1001}, {"items": 4, "scores": "1,2"}):
        assert client.get("/v1/plan/goal", params=bad, headers=ADMIN).status_code == 422


@pytest.mark.slow
def test_survey_goal_plan_uses_the_current_fit(client):
    labels = list("abcdef")
    survey = _create(client, labels, assignment="adaptive", goal={"top_k": 1, "level": 0.9})
    sid = survey["id"]
    assert client.get(f"/v1/surveys/{sid}/goal/plan", headers=ADMIN).status_code == 409  # no answers yet
    theta = dict(zip(labels, [3.0, 0, 0, 0, 0, 0], strict=True))
    _answer_until_met(client, survey, theta, np.random.default_rng(1), max_respondents=10)
    r = client.get(f"/v1/surveys/{sid}/goal/plan", params={"replications": 3}, headers=ADMIN)
    assert r.status_code == 200, r.text
    plan = r.json()
    assert plan["n_items"] == 6 and plan["top_k"] == 1 and plan["level"] == 0.9 and plan["epsilon"] == 2.0
    assert plan["scores"].startswith("the survey's current estimates")
    plain = _create(client, labels)
    assert client.get(f"/v1/surveys/{plain['id']}/goal/plan", headers=ADMIN).status_code == 409


def test_goal_plans_beyond_the_time_budget_are_refused_up_front(client, budget):
    budget(5.0)
    r = client.get(
        "/v1/plan/goal", params={"items": 2, "gap": 1e-300, "max_answers": 1_000_000}, headers=ADMIN
    )
    assert r.status_code == 422 and "time budget" in r.json()["detail"]
