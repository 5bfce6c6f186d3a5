"""Each site declares with its contribution whether it privatized its rankings; the round shows it."""

from __future__ import annotations

import json

import numpy as np
from sqlalchemy import select, update

from app.core.db.models import RoundSite
from tests.api.test_federated import NONE, Site, _site_data, open_round, ranking_survey
from tests.helpers.api import analyst_headers


def _mallows(epsilon):
    return {"privatization": "mallows", "epsilon": epsilon}


def _joined_round(client, sites=("north", "south", "east")):
    s = ranking_survey(client)
    rnd = open_round(client, s["id"], sites=sites)
    data = _site_data(np.arange(6), 0.4, [5] * len(sites), seed=3)
    members = [Site(client, x["token"], d) for x, d in zip(rnd["sites"], data, strict=True)]
    for site in members:
        site.join()
    return s, rnd, members


def _post(client, site, declaration, rng_seed=0):
    body = {"masked": site.masked(np.random.default_rng(rng_seed)), **declaration}
    return client.post("/v1/site/contribution", json=body, headers=site.h)


def test_each_declaration_is_stored_and_shown_with_the_round(client, db):
    s, rnd, (north, south, east) = _joined_round(client)
    url = f"/v1/surveys/{s['id']}/rounds/{rnd['id']}"
    fresh = client.get(url, headers=analyst_headers(client)).json()
    assert fresh["privacy"]["all_privatized"] is False and fresh["privacy"]["epsilon_max"] is None
    assert fresh["privacy"]["statement"].startswith("no site has contributed yet")
    assert _post(client, north, _mallows(1.0)).status_code == 201
    assert _post(client, south, _mallows(2)).status_code == 201
    now = client.get(url, headers=analyst_headers(client)).json()
    declared = {x["name"]: (x["privatization"], x["epsilon"]) for x in now["sites"]}
    assert declared == {"north": ("mallows", 1.0), "south": ("mallows", 2.0), "east": (None, None)}
    p = now["privacy"]
    assert p["all_privatized"] is False and p["epsilon_max"] == 2.0
    assert (
        "sites north, south privatized with the Mallows mechanism (north ε = 1, south ε = 2)"
        in p["statement"]
    )
    assert "not declared yet (no contribution): east" in p["statement"]
    assert p["statement"].endswith("the server sees only masked messages and cannot verify them")
    # A site sees its peers' declarations too.
    view = east.view()
    assert {x["name"]: x["privatization"] for x in view["peers"]} == {
        "north": "mallows",
        "south": "mallows",
        "east": None,
    }
    assert view["privacy"] == p
    assert _post(client, east, _mallows(0.5)).status_code == 201
    done = client.get(url, headers=analyst_headers(client)).json()
    p = done["privacy"]
    assert done["status"] == "complete" and p["all_privatized"] is True and p["epsilon_max"] == 2.0
    assert p["statement"].startswith(
        "every site's rankings were privatized with the Mallows mechanism at ε ≤ 2 "
        "(north ε = 1, south ε = 2, east ε = 0.5) (ε-ranking DP per local ranking"
    )
    assert "εm/2 = 6 with m = 6 items" in p["statement"]
    # The published result carries the declarations it was computed under.
    assert done["result"]["privacy"] == p
    db.rollback()
    rows = db.scalars(select(RoundSite).where(RoundSite.round_id == rnd["id"])).all()
    assert sorted((r.name, r.privatization, r.epsilon) for r in rows) == [
        ("east", "mallows", 0.5),
        ("north", "mallows", 1.0),
        ("south", "mallows", 2.0),
    ]


def test_a_site_that_did_not_privatize_is_named(client):
    s, rnd, sites = _joined_round(client)
    for site, declaration in zip(sites, (_mallows(1.5), NONE, _mallows(0.8)), strict=True):
        assert _post(client, site, declaration).status_code == 201
    done = client.get(f"/v1/surveys/{s['id']}/rounds/{rnd['id']}", headers=analyst_headers(client)).json()
    p = done["privacy"]
    assert p["all_privatized"] is False and p["epsilon_max"] == 1.5
    assert "the rankings of site south were not privatized" in p["statement"]
    assert "not differentially private with respect to them" in p["statement"]
    assert "every site" not in p["statement"]
    assert [(x["name"], x["privatization"], x["epsilon"]) for x in done["sites"]][1] == (
        "south",
        "none",
        None,
    )


def test_a_declaration_is_validated(client, unchanged):
    _, _, (north, *_) = _joined_round(client)
    masked = north.masked(np.random.default_rng(0))
    bad = [
        {"privatization": "none", "epsilon": 1.0},  # none with an ε
        {"privatization": "mallows"},  # mallows without
        {"privatization": "mallows", "epsilon": 0},
        {"privatization": "mallows", "epsilon": -1},
        # Outside any survey's ε bounds: 1e300 is no privacy, yet would read as 'all privatized',
        # with a bound εm/2 = inf; 1e-300 a claim of nearly perfect privacy no survey could make.
        {"privatization": "mallows", "epsilon": 1e300},
        {"privatization": "mallows", "epsilon": 30.5},
        {"privatization": "mallows", "epsilon": 1e-300},
        {"privatization": "laplace", "epsilon": 1},
        {},  # required
    ]
    with unchanged():
        for declaration in bad:
            r = client.post("/v1/site/contribution", json={"masked": masked, **declaration}, headers=north.h)
            assert r.status_code == 422, declaration
        raw = json.dumps({"masked": masked, "privatization": "mallows"})[:-1] + ', "epsilon": Infinity}'
        r = client.post(
            "/v1/site/contribution",
            content=raw,
            headers={**north.h, "Content-Type": "application/json"},
        )
        assert r.status_code == 422
    r = client.post("/v1/site/contribution", json={"masked": masked, **_mallows(30)}, headers=north.h)
    assert r.status_code == 201


def test_a_retry_with_another_declaration_is_refused(client, db, unchanged):
    _, _, (north, *_) = _joined_round(client)
    masked = north.masked(np.random.default_rng(0))
    assert (
        client.post(
            "/v1/site/contribution", json={"masked": masked, **_mallows(1)}, headers=north.h
        ).status_code
        == 201
    )
    with unchanged():
        again = client.post(
            "/v1/site/contribution", json={"masked": masked, **_mallows(1.0)}, headers=north.h
        )
        assert again.status_code == 200
        for other in (_mallows(2), NONE):
            r = client.post("/v1/site/contribution", json={"masked": masked, **other}, headers=north.h)
            assert r.status_code == 409, other
            assert r.json()["detail"] == (
                "this site already contributed this message, declaring privatization 'mallows' at ε = 1"
            )


def test_sites_that_contributed_before_declarations_are_not_counted_as_privatized(client, db):
    """Rows from before sites declared (privatization NULL after a contribution) are named as
    unknown, never summed up as privatized."""
    s, rnd, sites = _joined_round(client)
    for site in sites:
        assert _post(client, site, _mallows(1.0)).status_code == 201
    db.execute(
        update(RoundSite)
        .where(RoundSite.round_id == rnd["id"], RoundSite.name == "east")
        .values(privatization=None, epsilon=None)
    )
    db.commit()
    p = client.get(f"/v1/surveys/{s['id']}/rounds/{rnd['id']}", headers=analyst_headers(client)).json()[
        "privacy"
    ]
    assert p["all_privatized"] is False and p["epsilon_max"] == 1.0
    assert "site east contributed before sites declared their privatization: not known" in p["statement"]
    assert "every site" not in p["statement"]
