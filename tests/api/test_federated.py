"""Federated rounds over REST: sites agree on masks through the server, which sees only masked messages."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from app.cli.site import masked_message, new_private_key, public_key
from app.core.db.models import FederatedRound, RoundSite
from app.stats.federated import FederatedScheme
from app.stats.rankings import mallows_sample
from tests.helpers.api import ADMIN, analyst_headers, create_survey, register

LABELS = ("Housing", "Transit", "Parks", "Schools", "Safety", "Jobs")
#: The declaration of a site that did not privatize its rankings (sent with every contribution).
NONE = {"privatization": "none"}


def ranking_survey(client, labels=LABELS) -> dict:
    r = client.post(
        "/v1/surveys", json={"title": "Fed", "kind": "ranking", "items": list(labels)}, headers=ADMIN
    )
    assert r.status_code == 201, r.text
    return r.json()


def open_round(client, sid, method="borda", sites=("north", "south", "east"), **extra):
    r = client.post(
        f"/v1/surveys/{sid}/rounds", json={"method": method, "sites": list(sites), **extra}, headers=ADMIN
    )
    assert r.status_code == 201, r.text
    return r.json()


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


class Site:
    """A site run in-process: its key, its rankings (orderings of item positions)."""

    def __init__(self, client, token: str, orders: np.ndarray) -> None:
        self.client, self.h, self.orders = client, bearer(token), orders
        self.private = new_private_key()

    def join(self):
        r = self.client.put("/v1/site/key", json={"public_key": public_key(self.private)}, headers=self.h)
        assert r.status_code == 200, r.text
        return r.json()

    def view(self):
        return self.client.get("/v1/site", headers=self.h).json()

    def masked(self, rng=None):
        return masked_message(self.view(), self.private, self.orders, rng)

    def contribute(self, rng=None):
        return self.client.post(
            "/v1/site/contribution", json={"masked": self.masked(rng), **NONE}, headers=self.h
        )


def _site_data(center, phi, sizes, seed):
    rng = np.random.default_rng(seed)
    return [mallows_sample(center, phi, n, rng) for n in sizes]


@pytest.mark.parametrize("method", ["borda", "lehmer"])
def test_a_round_from_opening_to_the_published_consensus(client, db, method):
    s = ranking_survey(client)
    ids = [it["id"] for it in s["items"]]
    rnd = open_round(client, s["id"], method, phi=0.5)
    assert rnd["status"] == "open" and [x["name"] for x in rnd["sites"]] == ["north", "south", "east"]
    tokens = [x["token"] for x in rnd["sites"]]
    assert all(t.startswith("sit_") for t in tokens)
    p = rnd["parameters"]
    assert p["n_items"] == 6 and p["n_sites"] == 3 and p["phi"] == 0.5 and len(p["items"]) == 6
    scheme = FederatedScheme.from_parameters(p)
    assert p["message_length"] == scheme.length
    center = np.array([1, 3, 0, 5, 2, 4])  # Transit > Schools > Housing > Jobs > Parks > Safety
    data = _site_data(center, 0.3, (40, 25, 60), seed=1)
    sites = [Site(client, t, d) for t, d in zip(tokens, data, strict=True)]
    # Contributions wait for every key.
    sites[0].join()
    r = sites[0].client.post(
        "/v1/site/contribution", json={"masked": [0] * scheme.length, **NONE}, headers=sites[0].h
    )
    assert r.status_code == 409 and "south" in r.json()["detail"]
    for site in sites[1:]:
        site.join()
    assert sites[0].view()["ready"] is True
    for k, site in enumerate(sites):
        r = site.contribute(np.random.default_rng(k))
        assert r.status_code == 201, r.text
    view = sites[2].view()
    assert view["status"] == "complete" and view["contributed"] is True
    result = client.get(f"/v1/surveys/{s['id']}/rounds/{rnd['id']}", headers=analyst_headers(client)).json()
    assert result["status"] == "complete" and result["ended_at"] is not None
    assert result["result"]["order"] == [ids[x] for x in center]
    assert [it["rank"] for it in result["result"]["items"]] == list(range(1, 7))
    # The published aggregate is the sum of the plain messages; the masked ones are gone.
    plain = [scheme.message(d, np.random.default_rng(k)) for k, d in enumerate(data)]
    assert result["result"]["aggregate"] == np.sum(plain, axis=0).tolist()
    db.rollback()
    rows = db.scalars(select(RoundSite).where(RoundSite.round_id == rnd["id"])).all()
    assert all(row.masked is None and row.public_key for row in rows)
    assert all(site["joined"] and site["contributed"] and site["token"] is None for site in result["sites"])


def test_site_rules(client, db, unchanged):
    s = ranking_survey(client, labels=("a", "b", "c"))
    rnd = open_round(client, s["id"], sites=("x", "y"), allow_two_sites=True)
    scheme = FederatedScheme.from_parameters(rnd["parameters"])
    data = _site_data(np.arange(3), 0.4, (5, 5), seed=2)
    x, y = (Site(client, site["token"], d) for site, d in zip(rnd["sites"], data, strict=True))
    x.join()
    with unchanged():
        assert x.join()["ready"] is False  # the same key again: a no-op
        other = public_key(new_private_key())
        r = client.put("/v1/site/key", json={"public_key": other}, headers=x.h)
        assert r.status_code == 409 and "different public key" in r.json()["detail"]
        for bad in ("short", "!" * 43, "A" * 44):
            assert client.put("/v1/site/key", json={"public_key": bad}, headers=y.h).status_code == 422
    y.join()
    with unchanged():
        for masked in (
            [1] * (scheme.length + 1),
            [1 << int(scheme.bits.max())] * scheme.length,
            [-1] * scheme.length,
        ):
            r = client.post("/v1/site/contribution", json={"masked": masked, **NONE}, headers=x.h)
            assert r.status_code == 422, masked
    first = x.masked(np.random.default_rng(0))
    assert (
        client.post("/v1/site/contribution", json={"masked": first, **NONE}, headers=x.h).status_code == 201
    )
    with unchanged():
        again = client.post("/v1/site/contribution", json={"masked": first, **NONE}, headers=x.h)
        assert again.status_code == 200 and again.json()["contributed"] is True  # a retry
        changed = [(v + 1) % 2 for v in first]
        r = client.post("/v1/site/contribution", json={"masked": changed, **NONE}, headers=x.h)
        assert r.status_code == 409 and "different message" in r.json()["detail"]
    # Credentials: a site cannot act as a reader, readers cannot act as sites.
    assert client.get(f"/v1/surveys/{s['id']}/rounds", headers=x.h).status_code == 403
    assert client.get(f"/v1/surveys/{s['id']}/ranking", headers=x.h).status_code == 403
    assert client.get("/v1/site", headers=ADMIN).status_code == 403
    assert (
        client.get("/v1/site", headers={"Authorization": "Bearer sit_aaaaaaaaaaaaaaaa.nope"}).status_code
        == 401
    )
    _, h = register(client, s["id"])
    assert client.get("/v1/site", headers=h).status_code == 403


def test_opening_and_cancelling_rounds(client, unchanged):
    s = ranking_survey(client)
    pairwise = create_survey(client)
    analyst = analyst_headers(client)
    url = f"/v1/surveys/{s['id']}/rounds"
    with unchanged():
        bad = [
            {"method": "borda", "sites": ["only"]},
            {"method": "borda", "sites": ["a", "a"]},
            {"method": "borda", "sites": ["a", "b c"]},
            {"method": "mean", "sites": ["a", "b", "c"]},
            {"method": "lehmer", "sites": ["a", "b", "c"], "phi": 0.7},  # φ + φ² ≥ 1 + φ^N
            {"method": "borda", "sites": ["a", "b", "c"], "phi": 0},
            {"method": "borda", "sites": ["a", "b"]},  # two sites need allow_two_sites
        ]
        for body in bad:
            assert client.post(url, json=body, headers=ADMIN).status_code == 422, body
        body = {"method": "borda", "sites": ["a", "b"], "allow_two_sites": True}
        assert client.post(url, json=body, headers=analyst).status_code == 403
        assert client.post(url, json=body).status_code == 401
        r = client.post(f"/v1/surveys/{pairwise['id']}/rounds", json=body, headers=ADMIN)
        assert r.status_code == 409 and "ranking survey" in r.json()["detail"]
    rnd = open_round(
        client, s["id"], "lehmer", sites=("a", "b"), phi=0.6, max_rankings=1000, allow_two_sites=True
    )
    assert rnd["parameters"]["exact_histogram"] is True and rnd["parameters"]["low_bits"] >= 3
    page = client.get(url, headers=analyst).json()
    listed = page["rounds"]
    assert [x["id"] for x in listed] == [rnd["id"]] and all(x["token"] is None for x in listed[0]["sites"])
    assert page["total"] == 1 and client.get(f"{url}?limit=101", headers=analyst).status_code == 422
    site = Site(client, rnd["sites"][0]["token"], _site_data(np.arange(6), 0.3, (3,), 0)[0])
    site.join()
    assert client.post(f"{url}/{rnd['id']}/cancel", headers=analyst).status_code == 403
    r = client.post(f"{url}/{rnd['id']}/cancel", headers=ADMIN)
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    with unchanged():
        assert client.post(f"{url}/{rnd['id']}/cancel", headers=ADMIN).status_code == 409
        assert (
            client.put(
                "/v1/site/key", json={"public_key": public_key(new_private_key())}, headers=site.h
            ).status_code
            == 409
        )
        assert client.get(f"{url}/rnd_aaaaaaaaaaaaaaaa", headers=ADMIN).status_code == 404
        assert (
            client.get(f"/v1/surveys/{pairwise['id']}/rounds/{rnd['id']}", headers=ADMIN).status_code == 404
        )


def test_the_server_never_holds_an_unmasked_site_message(client, db):
    """Every value any privrank function holds while the server handles the contributions
    (the API handler, the service, the aggregation arithmetic — traced line by line) is
    compared with each site's plain message: none matches. The tracer does see the masked
    messages and their sum, so it is looking in the right place."""
    from app.federation import router as api
    from app.federation.schemas import ContributionIn

    s = ranking_survey(client)
    rnd = open_round(client, s["id"], "lehmer", phi=0.5)
    scheme = FederatedScheme.from_parameters(rnd["parameters"])
    data = _site_data(
        np.array([2, 0, 4, 1, 5, 3]), 0.5, (30, 30, 30), seed=9
    )  # three distinct plain messages (asserted below)
    sites = [Site(client, x["token"], d) for x, d in zip(rnd["sites"], data, strict=True)]
    for site in sites:
        site.join()
    plain = [scheme.message(d, np.random.default_rng(k)) for k, d in enumerate(data)]
    assert len({tuple(p) for p in plain}) == 3
    masked = [site.masked(np.random.default_rng(k)) for k, site in enumerate(sites)]
    app_dir = str(Path(api.__file__).resolve().parents[1])
    length = scheme.length
    seen: list[np.ndarray] = []

    def record(value):
        if isinstance(value, np.ndarray) and value.size == length:
            seen.append(value.astype(np.int64).ravel().copy())
        elif (
            isinstance(value, (list, tuple))
            and len(value) == length
            and all(isinstance(v, int) for v in value)
        ):
            seen.append(np.array(value, dtype=np.int64))

    def local(frame, event, arg):
        for value in frame.f_locals.values():
            record(value)
        if event == "return":
            record(arg)
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(app_dir) else None

    rows = {row.name: row for row in db.scalars(select(RoundSite).where(RoundSite.round_id == rnd["id"]))}
    sys.settrace(tracer)
    try:
        for site_json, vector in zip(rnd["sites"], masked, strict=True):
            with client.app.state.session_factory() as session:
                me = session.get(RoundSite, rows[site_json["name"]].id)
                api.site_contribution(
                    body=ContributionIn(masked=vector, privatization="none"), me=me, session=session
                )
    finally:
        sys.settrace(None)
    assert seen, "the tracer recorded nothing"
    for vec in seen:
        for p in plain:
            assert not np.array_equal(vec, p), "a server-side variable held a site's plain message"
    total = np.sum(plain, axis=0)
    assert any(np.array_equal(v, total) for v in seen)  # the sum — and only the sum — is unmasked
    assert any(np.array_equal(v, np.array(masked[0])) for v in seen)
    db.rollback()
    assert db.get(FederatedRound, rnd["id"]).status == "complete"


def test_seeds_bind_the_round_and_both_site_names():
    from app.cli.site import derive_seed

    a, b = new_private_key(), new_private_key()
    pa, pb = public_key(a), public_key(b)
    seed = derive_seed(a, pb, "rnd_x", "north", "south")
    assert seed == derive_seed(b, pa, "rnd_x", "south", "north")  # both ends agree
    assert seed != derive_seed(a, pb, "rnd_y", "north", "south")  # another round
    assert seed != derive_seed(a, pb, "rnd_x", "north", "east")  # another peer name
    assert len(seed) == 32


def test_small_order_keys_are_refused_and_cancel_forgets_masked_messages(client, db, unchanged):
    import base64

    s = ranking_survey(client)
    rnd = open_round(client, s["id"], sites=("p", "q", "r"))
    sites = [
        Site(client, x["token"], _site_data(np.arange(6), 0.4, (4,), k)[0])
        for k, x in enumerate(rnd["sites"])
    ]
    zero = base64.urlsafe_b64encode(bytes(32)).decode().rstrip("=")
    one = base64.urlsafe_b64encode(bytes([1]) + bytes(31)).decode().rstrip("=")
    with unchanged():
        for bad in (zero, one):
            r = client.put("/v1/site/key", json={"public_key": bad}, headers=sites[0].h)
            assert r.status_code == 422 and "small order" in r.json()["detail"]
    for site in sites:
        site.join()
    assert sites[0].contribute().status_code == 201
    db.rollback()
    stored = db.scalars(
        select(RoundSite).where(RoundSite.round_id == rnd["id"], RoundSite.masked.is_not(None))
    ).all()
    assert len(stored) == 1
    assert client.post(f"/v1/surveys/{s['id']}/rounds/{rnd['id']}/cancel", headers=ADMIN).status_code == 200
    db.rollback()
    assert (
        db.scalars(
            select(RoundSite).where(RoundSite.round_id == rnd["id"], RoundSite.masked.is_not(None))
        ).all()
        == []
    )
    assert sites[1].contribute().status_code == 409


def test_a_retry_after_the_round_completed_is_answered(client, unchanged):
    s = ranking_survey(client)
    rnd = open_round(client, s["id"], sites=("p", "q", "r"))
    sites = [
        Site(client, x["token"], _site_data(np.arange(6), 0.4, (4,), k)[0])
        for k, x in enumerate(rnd["sites"])
    ]
    for site in sites:
        site.join()
    sent = [site.masked(np.random.default_rng(k)) for k, site in enumerate(sites)]
    for site, m in zip(sites, sent, strict=True):
        assert (
            client.post("/v1/site/contribution", json={"masked": m, **NONE}, headers=site.h).status_code
            == 201
        )
    with unchanged():
        again = client.post("/v1/site/contribution", json={"masked": sent[0], **NONE}, headers=sites[0].h)
        assert again.status_code == 200 and again.json()["status"] == "complete"
        other = [(v + 1) % 2 for v in sent[0]]
        assert (
            client.post(
                "/v1/site/contribution", json={"masked": other, **NONE}, headers=sites[0].h
            ).status_code
            == 409
        )


def test_a_tied_aggregate_is_published_as_a_tie_with_shared_ranks(client):
    """Three sites with one ranking each, whose Borda aggregate is [9, 3, 11, 9, 13]: items
    a and d tie. Whatever order each round's tie-break draws, the result names the tied
    group, gives both rank 2, and says how the tie was broken."""
    labels = ("a", "b", "c", "d", "e")
    s = ranking_survey(client, labels=labels)
    ids = [it["id"] for it in s["items"]]
    data = [np.array([p]) for p in ((1, 2, 3, 0, 4), (1, 3, 0, 2, 4), (0, 1, 4, 2, 3))]
    firsts = set()
    for _ in range(6):
        rnd = open_round(client, s["id"], phi=0.5)
        sites = [Site(client, x["token"], d) for x, d in zip(rnd["sites"], data, strict=True)]
        for site in sites:
            site.join()
        for site in sites:
            assert site.contribute().status_code == 201
        result = client.get(f"/v1/surveys/{s['id']}/rounds/{rnd['id']}", headers=ADMIN).json()["result"]
        assert result["aggregate"] == [9, 3, 11, 9, 13]
        assert [sorted(g) for g in result["ties"]] == [sorted([ids[0], ids[3]])]
        assert result["ties"][0] == result["order"][1:3]
        assert "at random" in result["tie_break"] and "no information" in result["tie_break"]
        ranks = {it["item_id"]: it["rank"] for it in result["items"]}
        assert ranks == {ids[1]: 1, ids[0]: 2, ids[3]: 2, ids[2]: 4, ids[4]: 5}
        assert all("mean_quantized_position" not in it for it in result["items"])
        assert [it["mean_site_quantized_position"] for it in result["items"]][:3] == [1.0, 3.0, 3.0]
        assert sites[0].view()["result"] == result
        firsts.add(result["order"][1])
    assert firsts <= {ids[0], ids[3]}


def test_results_stored_before_ties_were_published_are_shown_in_the_current_form():
    from app.federation.service import published_result

    old = {
        "order": ["x", "y", "z"],
        "aggregate": [6, 6, 3],
        "items": [
            {"item_id": "z", "label": "Z", "rank": 1, "mean_quantized_position": 1.0},
            {"item_id": "x", "label": "X", "rank": 2, "mean_quantized_position": 2.0},
            {"item_id": "y", "label": "Y", "rank": 3, "mean_quantized_position": 2.0},
        ],
    }
    new = published_result("borda", old)
    assert new is not None and new["ties"] == [["x", "y"]] and "tie_break" in new
    assert [it["rank"] for it in new["items"]] == [1, 2, 2]
    assert all("mean_quantized_position" not in it for it in new["items"])
    assert published_result("borda", new) == new and published_result("lehmer", None) is None
