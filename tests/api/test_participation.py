"""Participatory surveys (app.participation.suggestions, app.participation.public_results): suggestions,
moderation, flags, roles and limits, unlinkable authorship, and the public results."""

from __future__ import annotations

from datetime import datetime
from unittest.mock import ANY

import numpy as np
import pytest
from sqlalchemy import inspect, select, text

from app.core.db.models import HeldContribution, Item, ItemFlag, ParticipationSlot, Respondent, Suggestion
from tests.helpers.api import ADMIN, analyst_headers, create_ranking_survey, register


def _survey(client, items=("Parks", "Bike lanes", "Libraries", "Night buses"), **extra) -> dict:
    body = {"title": "City ideas", "items": list(items), **extra}
    r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()


def _suggest(client, sid, headers, label):
    return client.post(f"/v1/surveys/{sid}/suggestions", json={"label": label}, headers=headers)


def _served_items(client, sid, headers, rounds=30) -> set[str]:
    seen: set[str] = set()
    for _ in range(rounds):
        pairs = client.get(f"/v1/surveys/{sid}/pairs?count=10", headers=headers).json()["pairs"]
        seen |= {p["a"] for p in pairs} | {p["b"] for p in pairs}
    return seen


def test_the_moderation_flow_before(client):
    s = _survey(
        client, suggestions={"enabled": True, "per_respondent": 3, "moderation": "before", "batch": 2}
    )
    sid = s["id"]
    assert s["suggestions"] == {
        "enabled": True,
        "per_respondent": 3,
        "moderation": "before",
        "flag_threshold": 3,
        "batch": 2,
        "per_hour": 100,
        "max_total": 1000,
    }
    public = client.get(f"/v1/surveys/{sid}/public").json()
    assert public["suggestions"] == {"enabled": True, "per_respondent": 3, "moderation": "before", "batch": 2}
    _, h = register(client, sid)
    remaining = [
        _suggest(client, sid, h, label) for label in ("parks!", "Community gardens", "Safer crossings")
    ]
    assert [r.status_code for r in remaining] == [202, 202, 202]
    assert [r.json()["remaining"] for r in remaining] == [2, 1, 0]
    over = _suggest(client, sid, h, "One more")
    assert over.status_code == 409 and "3 suggestions" in over.json()["detail"]
    assert over.json()["code"] == "suggestion_limit"
    # Held until a second respondent suggests: moderators see how many wait, not what.
    moderator = analyst_headers(client, role="moderator")
    queue = client.get(f"/v1/surveys/{sid}/suggestions", headers=moderator).json()
    assert (queue["total"], queue["held"], queue["held_respondents"], queue["batch"]) == (0, 3, 1, 2)
    # Each batch takes one suggestion of each of two respondents: three from another
    # respondent publish all six.
    _, other = register(client, sid)
    for label in ("Tree planting", "Public toilets", "Street lights"):
        assert _suggest(client, sid, other, label).json() == {"received": True, "remaining": ANY, "batch": 2}
    queue = client.get(f"/v1/surveys/{sid}/suggestions", headers=moderator).json()
    assert (queue["total"], queue["held"]) == (6, 0)
    # Pending suggestions are not items: nothing new is served, the survey still has 4 items.
    assert client.get(f"/v1/surveys/{sid}/public").json()["n_items"] == 4
    assert client.get(f"/v1/surveys/{sid}", headers=moderator).json()["pending_suggestions"] == 6
    listed = client.get("/v1/surveys?limit=1000", headers=moderator).json()["surveys"]
    assert next(x for x in listed if x["id"] == sid)["pending_suggestions"] == 6
    queue = client.get(f"/v1/surveys/{sid}/suggestions", headers=moderator).json()
    assert queue["total"] == 6
    # One batch, one time: the hour it was published.
    assert len({q["received_at"] for q in queue["suggestions"]}) == 1
    by_label = {q["label"]: q for q in queue["suggestions"]}
    # "parks!" is the seed item "Parks" once case and punctuation are folded.
    dup = by_label["parks!"]["similar"][0]
    assert dup["same_text"] and dup["similarity"] == 1.0 and dup["label"] == "Parks" and dup["item_id"]
    assert by_label["Community gardens"]["similar"] == []
    received = datetime.fromisoformat(by_label["parks!"]["received_at"])
    assert (received.minute, received.second, received.microsecond) == (0, 0, 0)

    # Merge the duplicate into the seed item; nothing is added.
    parks = next(i for i in s["items"] if i["label"] == "Parks")
    merged = client.post(
        f"/v1/surveys/{sid}/suggestions/{by_label['parks!']['id']}/merge",
        json={"item_id": parks["id"]},
        headers=moderator,
    )
    assert merged.status_code == 200 and merged.json()["status"] == "merged"
    assert merged.json()["item_id"] == parks["id"]
    # Approving a label an item already has is refused: merge instead.
    clash = client.post(
        f"/v1/surveys/{sid}/suggestions/{by_label['Community gardens']['id']}/approve",
        json={"label": "bike LANES"},
        headers=moderator,
    )
    assert clash.status_code == 409 and "merge" in clash.json()["detail"]
    # Edit, then approve: the edited text becomes a suggested item, served at once.
    gid = by_label["Community gardens"]["id"]
    edited = client.patch(
        f"/v1/surveys/{sid}/suggestions/{gid}",
        json={"label": "Community gardens in every district"},
        headers=moderator,
    )
    assert edited.status_code == 200 and edited.json()["label"] == "Community gardens in every district"
    approved = client.post(f"/v1/surveys/{sid}/suggestions/{gid}/approve", headers=moderator)
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    item_id = approved.json()["item_id"]
    survey = client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()
    new = next(i for i in survey["items"] if i["id"] == item_id)
    assert new["label"] == "Community gardens in every district" and new["source"] == "suggested"
    assert new["status"] == "live" and new["approved_at"] is not None
    assert {i["source"] for i in survey["items"] if i["id"] != item_id} == {"seed"}
    _, h2 = register(client, sid)
    assert item_id in _served_items(client, sid, h2, rounds=3)
    # Reject needs a reason; a decided suggestion cannot be decided again.
    sid3 = by_label["Safer crossings"]["id"]
    assert (
        client.post(
            f"/v1/surveys/{sid}/suggestions/{sid3}/reject", json={"reason": ""}, headers=moderator
        ).status_code
        == 422
    )
    rejected = client.post(
        f"/v1/surveys/{sid}/suggestions/{sid3}/reject",
        json={"reason": "Not a city matter"},
        headers=moderator,
    )
    assert rejected.json()["status"] == "rejected" and rejected.json()["reason"] == "Not a city matter"
    again = client.post(f"/v1/surveys/{sid}/suggestions/{sid3}/approve", headers=moderator)
    assert again.status_code == 409
    assert client.get(f"/v1/surveys/{sid}/suggestions", headers=moderator).json()["total"] == 3
    everything = client.get(f"/v1/surveys/{sid}/suggestions?status=all", headers=moderator).json()
    assert sorted(q["status"] for q in everything["suggestions"]) == ["approved", "merged"] + [
        "pending"
    ] * 3 + ["rejected"]
    # A moderator reads surveys and moderates, nothing else.
    assert client.get(f"/v1/surveys/{sid}/ranking", headers=moderator).status_code == 403
    assert client.get(f"/v1/surveys/{sid}/comparisons.csv", headers=moderator).status_code == 403
    assert client.patch(f"/v1/surveys/{sid}", json={"title": "x"}, headers=moderator).status_code == 403
    # An analyst reads surveys but does not see the queue.
    assert client.get(f"/v1/surveys/{sid}/suggestions", headers=analyst_headers(client)).status_code == 403


def test_moderation_after_is_live_at_once_and_can_be_hidden(client):
    s = _survey(client, suggestions={"enabled": True, "moderation": "after", "per_respondent": 2, "batch": 2})
    sid = s["id"]
    _, h = register(client, sid)
    assert _suggest(client, sid, h, "Free water fountains").status_code == 202
    assert _suggest(client, sid, h, "  NIGHT buses ").status_code == 202  # the seed item, folded
    assert len(client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["items"]) == 4  # held
    _, other = register(client, sid)
    assert _suggest(client, sid, other, "Cleaner streets").status_code == 202
    assert _suggest(client, sid, other, "More benches").status_code == 202
    survey = client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()
    assert len(survey["items"]) == 7
    new = next(i for i in survey["items"] if i["label"] == "Free water fountains")
    assert new["source"] == "suggested" and new["approved_at"]
    decided = client.get(f"/v1/surveys/{sid}/suggestions?status=all", headers=ADMIN).json()["suggestions"]
    assert sorted(q["status"] for q in decided) == ["approved"] * 3 + ["merged"]
    assert survey["items"][3]["id"] in {q["item_id"] for q in decided}
    _, h2 = register(client, sid)
    assert new["id"] in _served_items(client, sid, h2, rounds=2)
    hidden = client.patch(f"/v1/surveys/{sid}/items/{new['id']}", json={"status": "hidden"}, headers=ADMIN)
    assert hidden.status_code == 200 and hidden.json()["status"] == "hidden"
    _, h3 = register(client, sid)
    seen = _served_items(client, sid, h3, rounds=5)
    assert new["id"] not in seen and len(seen) == 6  # every other item still served
    assert (
        client.patch(f"/v1/surveys/{sid}/items/{new['id']}", json={"status": "live"}, headers=ADMIN).json()[
            "status"
        ]
        == "live"
    )
    _, h4 = register(client, sid)
    assert new["id"] in _served_items(client, sid, h4, rounds=2)


def test_flags_count_once_per_respondent_and_send_a_suggested_item_to_review(client):
    items = [f"idea {k}" for k in range(12)]
    s = _survey(
        client,
        items=items,
        suggestions={"enabled": True, "flag_threshold": 2, "moderation": "after", "batch": 2},
    )
    sid = s["id"]
    _, a = register(client, sid)
    _, b = register(client, sid)
    assert _suggest(client, sid, a, "A suggested idea").status_code == 202
    assert _suggest(client, sid, b, "Another suggested idea").status_code == 202
    target = next(
        i["id"]
        for i in client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["items"]
        if i["label"] == "A suggested idea"
    )

    def item(item_id):
        return next(
            i for i in client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["items"] if i["id"] == item_id
        )

    for _ in range(3):
        assert client.post(f"/v1/surveys/{sid}/items/{target}/flag", headers=a).status_code == 204
    assert (item(target)["flags"], item(target)["status"]) == (0, "live")  # held for its batch
    assert client.post(f"/v1/surveys/{sid}/items/{target}/flag", headers=b).status_code == 204
    assert (item(target)["flags"], item(target)["status"]) == (2, "review")
    _, c = register(client, sid)
    assert target not in _served_items(client, sid, c, rounds=8)
    # Answers about it are refused while it is withheld (a crafted client).
    seed = s["items"][0]["id"]
    crafted = {"privatized": False, "comparisons": [{"a": target, "b": seed, "winner": target}]}
    refused = client.post(f"/v1/surveys/{sid}/responses", json=crafted, headers=c)
    assert refused.status_code == 409 and "withheld" in refused.json()["detail"]
    # Restoring clears the flags; the same respondents' earlier flags do not count again.
    client.patch(f"/v1/surveys/{sid}/items/{target}", json={"status": "live"}, headers=ADMIN)
    assert client.post(f"/v1/surveys/{sid}/items/{target}/flag", headers=a).status_code == 204
    assert (item(target)["flags"], item(target)["status"]) == (0, "live")
    assert client.post(f"/v1/surveys/{sid}/responses", json=crafted, headers=c).status_code in (200, 201)
    # A seed item collects flags for the moderators but stays live: a few throw-away
    # registrations cannot take the organisers' items out of the survey.
    _, d = register(client, sid)
    for h in (a, b, c, d):
        assert client.post(f"/v1/surveys/{sid}/items/{seed}/flag", headers=h).status_code == 204
    assert (item(seed)["flags"], item(seed)["status"]) == (4, "live")
    # At most 10 flags per respondent.
    codes = [
        client.post(f"/v1/surveys/{sid}/items/{i['id']}/flag", headers=c).status_code for i in s["items"][1:]
    ]
    assert codes == [204] * 9 + [409, 409]
    over = client.post(f"/v1/surveys/{sid}/items/{s['items'][-1]['id']}/flag", headers=c)
    assert over.json()["code"] == "flag_limit"
    # Unknown items, and items of another survey, are not found.
    other = _survey(client, items=["x", "y"], suggestions={"enabled": True})
    assert (
        client.post(f"/v1/surveys/{sid}/items/{other['items'][0]['id']}/flag", headers=a).status_code == 404
    )
    # A closed survey takes no flags.
    client.patch(f"/v1/surveys/{sid}", json={"status": "closed"}, headers=ADMIN)
    closed = client.post(f"/v1/surveys/{sid}/items/{s['items'][5]['id']}/flag", headers=b)
    assert closed.status_code == 409 and closed.json()["code"] == "survey_closed"


def test_settings_are_checked(client):
    def create(**extra):
        return client.post("/v1/surveys", json={"title": "t", "items": ["a", "b"], **extra}, headers=ADMIN)

    assert create(suggestions={"per_respondent": 0}).status_code == 422
    assert create(suggestions={"per_respondent": 21}).status_code == 422
    assert create(suggestions={"moderation": "never"}).status_code == 422
    assert create(suggestions={"flag_threshold": 0}).status_code == 422
    assert create(suggestions={"batch": 1}).status_code == 422  # a batch of one links its author
    assert create(suggestions={"batch": 51}).status_code == 422
    assert create(suggestions={"batch": True}).status_code == 422
    assert create(results_on_finish=True).status_code == 422
    assert create(kind="ranking", suggestions={}).status_code == 422
    assert create(suggestions={"per_respondent": True}).status_code == 422  # no coercion
    assert create(suggestions={"enabled": "false"}).status_code == 422
    goal = {"assignment": "adaptive", "goal": {"top_k": 1}}
    assert create(suggestions={}, **goal).status_code == 422
    sid = create().json()["id"]
    _, h = register(client, sid)
    assert _suggest(client, sid, h, "idea").status_code == 409  # suggestions are off
    on = client.patch(f"/v1/surveys/{sid}", json={"suggestions": {"per_respondent": 1}}, headers=ADMIN)
    assert on.status_code == 200 and on.json()["suggestions"]["per_respondent"] == 1
    assert _suggest(client, sid, h, "x" * 201).status_code == 422
    assert _suggest(client, sid, h, "idea").status_code == 202
    # A title change leaves the settings alone; null turns them off.
    assert client.patch(f"/v1/surveys/{sid}", json={"title": "u"}, headers=ADMIN).json()["suggestions"]
    off = client.patch(f"/v1/surveys/{sid}", json={"suggestions": None}, headers=ADMIN)
    assert off.json()["suggestions"] is None
    client.patch(f"/v1/surveys/{sid}", json={"status": "closed", "suggestions": {}}, headers=ADMIN)
    _, h2 = register(client, sid) if False else (None, h)
    assert _suggest(client, sid, h2, "late idea").status_code == 409  # closed


def test_authorship_is_not_stored(client, app):
    """After suggestions and flags from known respondents, no stored row holds a respondent id
    or token next to a suggestion or a flag, and the respondents' rows hold counts only."""
    s = _survey(client, suggestions={"enabled": True, "moderation": "after", "flag_threshold": 5, "batch": 3})
    sid = s["id"]
    known = []
    for k in range(3):
        rid, h = register(client, sid)
        token = h["Authorization"].split()[1]
        known.append((rid, token))
        assert _suggest(client, sid, h, f"Authored idea number {k}").status_code == 202
        assert (
            client.post(f"/v1/surveys/{sid}/items/{s['items'][0]['id']}/flag", headers=h).status_code == 204
        )
    texts = [f"Authored idea number {k}" for k in range(3)]
    secrets = [x for rid, token in known for x in (rid, token, token.partition(".")[2])]
    with app.state.session_factory() as session:
        conn = session.connection()
        for table in inspect(conn).get_table_names():
            for row in conn.execute(text(f'SELECT * FROM "{table}"')):
                cells = " ".join(str(v) for v in row)
                if any(t in cells for t in texts) or table in ("suggestions", "item_flags"):
                    assert not any(x in cells for x in secrets), (table, cells)
        assert {c.name for c in Suggestion.__table__.columns} == {
            "id",
            "survey_id",
            "label",
            "status",
            "reason",
            "item_id",
            "received_at",
            "decided_at",
            "decided_by",
        }
        assert {c.name for c in ItemFlag.__table__.columns} == {"item_id", "digest"}
        # The allowances are slots keyed with the tokens: one suggestion and one flag each,
        # and the respondents' own rows were not written (no column counts them).
        slots = session.scalars(
            select(ParticipationSlot.digest).where(ParticipationSlot.survey_id == sid)
        ).all()
        assert len(slots) == 6
        assert {c.name for c in Respondent.__table__.columns} == {
            "id",
            "survey_id",
            "token_hash",
            "epsilon",
            "epsilon_spent",
            "n_comparisons",
            "external_ref",
            "external_key",  # an integration's digest of its own id, set at registration
            "created_at",
        }
        flags = session.scalars(select(ItemFlag.digest).where(ItemFlag.item_id == s["items"][0]["id"])).all()
        assert len(flags) == 3
        items = session.scalars(
            select(Item.label).where(Item.survey_id == sid, Item.source == "suggested")
        ).all()
        assert sorted(items) == texts
        # Both batches were published: nothing is held any more.
        assert session.scalars(select(HeldContribution).where(HeldContribution.survey_id == sid)).all() == []


def test_public_results(client, app, monkeypatch):
    monkeypatch.setattr(app.state.public_results, "seconds", 0.0)  # caching: its own test
    # Each respondent answers the 6 pairs at ε = 2: a cap of 12.
    s = _survey(
        client, suggestions={"enabled": True}, public_results=True, privacy={"respondent_budget": 12.0}
    )
    sid = s["id"]
    private = _survey(client)
    assert client.get(f"/v1/surveys/{private['id']}/results").status_code == 404
    empty = client.get(f"/v1/surveys/{sid}/results")
    assert empty.status_code == 200
    # Without intervals: a lay note that there is not enough data yet, and nothing about a bar
    # or how to ask the API for other intervals.
    note, codes = empty.json()["note"], [n["code"] for n in empty.json()["notes"]]
    assert "not enough data yet" in note and "no intervals are shown" in note, note
    assert "bar" not in note and "uncertainty" not in note and "=" not in note, note
    assert codes == ["pairwise", "no_intervals", "randomized"]
    ids = [i["id"] for i in s["items"]]
    rng = np.random.default_rng(17)  # answers randomized here (privatized: true), so the data is fixed
    keep = np.exp(2.0) / (1 + np.exp(2.0))
    theta = [0.6, 0.2, -0.2, -0.6]
    for _ in range(40):
        _, h = register(client, sid, epsilon=2.0)
        comparisons = []
        for a in range(4):
            for b in range(a + 1, 4):
                first = rng.random() < 1 / (1 + np.exp(theta[b] - theta[a]))  # BTL
                reported = first if rng.random() < keep else not first  # randomized response, ε = 2
                comparisons.append({"a": ids[a], "b": ids[b], "winner": ids[a if reported else b]})
        body = {"privatized": True, "epsilon": 2.0, "comparisons": comparisons}
        r = client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h)
        assert r.status_code in (200, 201), r.text
    out = client.get(f"/v1/surveys/{sid}/results").json()
    assert [i["rank"] for i in out["items"]] == [1, 2, 3, 4]
    assert out["respondents"] == 40 and out["comparisons"] == 240 and out["withheld"] == 0
    for i in out["items"]:
        assert i["ci"][0] <= i["score"] <= i["ci"][1]
        assert i["comparisons"] == 120
    scores = [i["score"] for i in out["items"]]
    assert scores == sorted(scores, reverse=True)
    assert "no intervals" not in out["note"] and "The bar is the 95% interval" in out["note"]
    assert [n["code"] for n in out["notes"]] == ["pairwise", "pairwise_intervals", "randomized"]
    # The same order as the analysts' ranking.
    ranking = client.get(f"/v1/surveys/{sid}/ranking", headers=ADMIN).json()
    assert [i["item_id"] for i in out["items"]] == [i["item_id"] for i in ranking["items"]]
    # A hidden item leaves the page; ranks count the items shown.
    client.patch(f"/v1/surveys/{sid}/items/{ids[1]}", json={"status": "hidden"}, headers=ADMIN)
    out = client.get(f"/v1/surveys/{sid}/results").json()
    assert ids[1] not in {i["item_id"] for i in out["items"]} and out["withheld"] == 1
    assert [i["rank"] for i in out["items"]] == [1, 2, 3] and "1 item hidden" in out["note"]
    assert out["notes"][-1] == {"code": "withheld", "params": {"n": 1}}
    # Turning the page off answers 404 again.
    client.patch(f"/v1/surveys/{sid}", json={"public_results": False}, headers=ADMIN)
    assert client.get(f"/v1/surveys/{sid}/results").status_code == 404


def test_public_results_are_computed_at_most_once_a_minute(client, app):
    """Anonymous callers cannot make the service refit: a snapshot serves for a minute
    (new answers wait for the next one), except that hiding an item takes effect at once."""
    s = _survey(client, public_results=True)
    sid, ids = s["id"], [i["id"] for i in s["items"]]
    first = client.get(f"/v1/surveys/{sid}/results").json()
    _, h = register(client, sid)
    body = {"privatized": False, "comparisons": [{"a": ids[0], "b": ids[1], "winner": ids[0]}]}
    assert client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h).status_code in (200, 201)
    again = client.get(f"/v1/surveys/{sid}/results").json()
    assert again == first and again["comparisons"] == 0  # the snapshot, not a new fit
    client.patch(f"/v1/surveys/{sid}/items/{ids[3]}", json={"status": "hidden"}, headers=ADMIN)
    hidden = client.get(f"/v1/surveys/{sid}/results").json()
    assert hidden["withheld"] == 1 and hidden["comparisons"] == 1 and hidden["as_of"] > first["as_of"]
    # Its computations have a turn of work of their own, not one of the analysts'.
    assert app.state.public_results.fit_cache.work is not app.state.fit_cache.work


def test_public_results_of_central_and_ranking_surveys(client, app, monkeypatch):
    monkeypatch.setattr(app.state.public_results, "seconds", 0.0)
    privacy = {"model": "central", "total_budget": 10.0, "max_comparisons_per_respondent": 3}
    c = _survey(client, items=["a", "b", "c"], privacy=privacy, public_results=True)
    none = client.get(f"/v1/surveys/{c['id']}/results").json()
    assert none["items"] == [] and none["release"] is None and "Nothing is published" in none["note"]
    release = client.post(
        f"/v1/surveys/{c['id']}/releases",
        json={"method": "noisy_counts", "unit": "individual", "epsilon": 1.0},
        headers=ADMIN,
    ).json()
    out = client.get(f"/v1/surveys/{c['id']}/results").json()
    assert out["release"]["id"] == release["id"]
    assert [i["item_id"] for i in out["items"]] == [i["item_id"] for i in release["result"]["items"]]
    r = create_ranking_survey(client)
    client.patch(f"/v1/surveys/{r['id']}", json={"public_results": True}, headers=ADMIN)
    assert client.get(f"/v1/surveys/{r['id']}/results").json()["note"] == "No rankings yet."
    ids = [i["id"] for i in r["items"]]
    for _ in range(5):
        _, h = register(client, r["id"])
        sent = client.post(
            f"/v1/surveys/{r['id']}/responses", json={"privatized": False, "ranking": ids}, headers=h
        )
        assert sent.status_code in (200, 201), sent.text
    ranked = client.get(f"/v1/surveys/{r['id']}/results").json()
    consensus = client.get(f"/v1/surveys/{r['id']}/ranking", headers=ADMIN).json()
    assert ranked["kind"] == "ranking" and ranked["respondents"] == 5
    assert [i["item_id"] for i in ranked["items"]] == consensus["order"]


@pytest.mark.parametrize("status", ["hidden"])
def test_goal_and_ranking_surveys_do_not_hide_items(client, status):
    r = create_ranking_survey(client)
    res = client.patch(
        f"/v1/surveys/{r['id']}/items/{r['items'][0]['id']}", json={"status": status}, headers=ADMIN
    )
    assert res.status_code == 409


def test_one_token_racing_itself_gets_exactly_its_limit(app):
    """Eight simultaneous suggestions and eight simultaneous flags from one token: the limit
    of 3 suggestions holds exactly, and the flag counts once."""
    import threading

    from fastapi.testclient import TestClient

    with TestClient(app) as client:
        s = _survey(client, suggestions={"enabled": True, "per_respondent": 3, "flag_threshold": 50})
        sid, target = s["id"], s["items"][0]["id"]
        _, h = register(client, sid)
        barrier = threading.Barrier(8)
        codes: list[int] = []
        flags: list[int] = []

        def go(k: int) -> None:
            barrier.wait()
            codes.append(_suggest(client, sid, h, f"racing idea {k}").status_code)
            flags.append(client.post(f"/v1/surveys/{sid}/items/{target}/flag", headers=h).status_code)

        threads = [threading.Thread(target=go, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(codes) == [202] * 3 + [409] * 5
        assert flags == [204] * 8
        assert client.get(f"/v1/surveys/{sid}/suggestions", headers=ADMIN).json()["held"] == 3
        with app.state.session_factory() as session:
            held = session.scalars(
                select(HeldContribution.kind).where(HeldContribution.survey_id == sid)
            ).all()
            assert sorted(held) == ["flag"] + ["suggestion"] * 3
            slots = session.scalars(
                select(ParticipationSlot.digest).where(ParticipationSlot.survey_id == sid)
            ).all()
            assert len(slots) == 4  # three suggestions and one flag


def test_a_failed_suggestion_gives_its_count_back(client, app, monkeypatch):
    """Storing the suggestion fails: its transaction, which took the respondent's slot, is
    rolled back whole — no slot, no suggestion — and the next suggestion works."""
    from app.participation import suggestions

    s = _survey(client, suggestions={"enabled": True, "per_respondent": 1})
    sid = s["id"]
    _, h = register(client, sid)

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(suggestions, "_hold", broken)
    assert _suggest(client, sid, h, "lost idea").status_code == 500
    monkeypatch.undo()
    with app.state.session_factory() as session:
        assert (
            session.scalars(select(ParticipationSlot).where(ParticipationSlot.survey_id == sid)).all() == []
        )
        assert session.scalars(select(HeldContribution).where(HeldContribution.survey_id == sid)).all() == []
    assert _suggest(client, sid, h, "kept idea").status_code == 202


def test_with_most_items_hidden_every_live_pair_is_still_served(client, monkeypatch):
    """When the hidden items' pairs are too many to list (forced here), pairs touching them
    are drawn and dropped; if that leaves a request short, the rest comes from the live
    items renumbered. A respondent gets every live pair and only then hears it is done."""
    from app.respondents import assignment

    monkeypatch.setattr(assignment, "_EXCLUDE_KEYS", 0)
    s = _survey(
        client,
        items=[f"item {k}" for k in range(40)],
        suggestions={"enabled": True},
        privacy={"respondent_budget": "unlimited"},  # one respondent answers every live pair
    )
    sid = s["id"]
    for it in s["items"][10:]:
        client.patch(f"/v1/surveys/{sid}/items/{it['id']}", json={"status": "hidden"}, headers=ADMIN)
    live = {it["id"] for it in s["items"][:10]}
    _, h = register(client, sid)
    seen: set[frozenset] = set()
    while True:
        out = client.get(f"/v1/surveys/{sid}/pairs?count=10", headers=h).json()
        pairs = out["pairs"]
        if not pairs:
            assert out["reason"] == "all_answered"
            break
        assert {p["a"] for p in pairs} | {p["b"] for p in pairs} <= live
        if len(seen) + len(pairs) < 45:
            assert len(pairs) == 10, out  # never short while live pairs remain
        body = {
            "privatized": False,
            "comparisons": [{"a": p["a"], "b": p["b"], "winner": p["a"]} for p in pairs],
        }
        assert client.post(f"/v1/surveys/{sid}/responses", json=body, headers=h).status_code in (200, 201)
        new = {frozenset((p["a"], p["b"])) for p in pairs}
        assert not new & seen
        seen |= new
    assert len(seen) == 45  # every pair of the 10 live items, once


def _held(app, sid) -> list[HeldContribution]:
    with app.state.session_factory() as session:
        return list(session.scalars(select(HeldContribution).where(HeldContribution.survey_id == sid)))


def test_a_suggestion_the_survey_no_longer_takes_goes_to_review_and_the_batch_is_published(client, app):
    """An item's translation comes to show a held suggestion's text before its batch is
    complete: the respondent who completes the batch is answered as any other (not with
    the clash, which would show it another's text), the clashing suggestion waits for a
    moderator, and the rest of the batch is published."""
    s = _survey(client, items=("Parks", "Buses", "Trams"), suggestions={"moderation": "after", "batch": 2})
    sid, parks = s["id"], s["items"][0]["id"]
    _, a = register(client, sid)
    assert _suggest(client, sid, a, "Grünanlagen").status_code == 202
    translated = client.patch(
        f"/v1/surveys/{sid}/items/{parks}", json={"translations": {"de": "Grünanlagen"}}, headers=ADMIN
    )
    assert translated.status_code == 200, translated.text
    _, b = register(client, sid)
    done = _suggest(client, sid, b, "Bike lanes")
    assert done.status_code == 202 and "Grünanlagen" not in done.text
    labels = [i["label"] for i in client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["items"]]
    assert labels == ["Parks", "Buses", "Trams", "Bike lanes"]
    queue = client.get(f"/v1/surveys/{sid}/suggestions", headers=ADMIN).json()
    assert [q["label"] for q in queue["suggestions"]] == ["Grünanlagen"] and queue["held"] == 0
    assert _held(app, sid) == []


def test_a_held_contribution_keeps_the_batch_and_moderation_it_was_promised(client, app):
    """Lowering the batch does not publish what waits in a smaller batch than its sender was
    told; switching moderation to "after" does not make a suggestion sent under "before"
    live without review."""
    s = _survey(client, suggestions={"moderation": "before", "batch": 3})
    sid = s["id"]
    _, victim = register(client, sid)
    assert _suggest(client, sid, victim, "Victim's idea").json()["batch"] == 3
    lowered = client.patch(
        f"/v1/surveys/{sid}", json={"suggestions": {"moderation": "after", "batch": 2}}, headers=ADMIN
    )
    assert lowered.status_code == 200
    _, other = register(client, sid)
    assert _suggest(client, sid, other, "Second idea").json()["batch"] == 2
    assert len(_held(app, sid)) == 2  # two respondents: not the three the first was promised
    _, third = register(client, sid)
    assert _suggest(client, sid, third, "Third idea").status_code == 202
    assert _held(app, sid) == []
    decided = client.get(f"/v1/surveys/{sid}/suggestions?status=all", headers=ADMIN).json()["suggestions"]
    assert {q["label"]: q["status"] for q in decided} == {
        "Victim's idea": "pending",  # sent under "before": a moderator reviews it
        "Second idea": "approved",
        "Third idea": "approved",
    }


@pytest.mark.parametrize("change", [{"status": "closed"}, {"suggestions": None}])
def test_closing_or_switching_suggestions_off_discards_what_is_held(client, app, change):
    s = _survey(client, suggestions={"batch": 3})
    sid = s["id"]
    _, h = register(client, sid)
    assert _suggest(client, sid, h, "An idea never published").status_code == 202
    assert client.post(f"/v1/surveys/{sid}/items/{s['items'][0]['id']}/flag", headers=h).status_code == 204
    assert len(_held(app, sid)) == 2
    assert client.patch(f"/v1/surveys/{sid}", json=change, headers=ADMIN).status_code == 200
    assert _held(app, sid) == []
    with app.state.session_factory() as session:
        assert session.scalars(select(Suggestion).where(Suggestion.survey_id == sid)).all() == []
