"""Central surveys with zCDP accounting (docs/mechanisms.md §2.6): ρ releases with
discrete Gaussian noise, a ledger that sums ρ and shows (ε, δ), and an accounting that is
fixed at the first release. Pure surveys read exactly as they do without it."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import func, select

from app.core.db.models import Release, Survey
from app.stats.accounting import DEFAULT_DELTA, zcdp_epsilon, zcdp_rho_for
from tests.helpers.api import ADMIN, create_survey, import_comparisons

L = 3
ZCDP = {"model": "central", "total_budget": 3.0, "max_comparisons_per_respondent": L, "accounting": "zcdp"}

#: The keys of a pure survey's answers, as they are where zCDP does not exist.
PURE_RELEASE_KEYS = {
    "id",
    "survey_id",
    "method",
    "unit",
    "epsilon",
    "cost",
    "cost_explanation",
    "budget_after",
    "k",
    "created_at",
    "parameters",
    "result",
    "budget",
}
PURE_BUDGET_KEYS = {"total", "spent", "remaining"}


def central(client, **privacy) -> dict:
    body = {"title": "Trusted", "items": ["A", "B", "C", "D"], "privacy": {**ZCDP, **privacy}}
    r = client.post("/v1/surveys", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    s = r.json()
    lines = ["respondent,item_a,item_b,winner"]
    for p in range(20):
        lines += [f"p{p},A,B,A", f"p{p},A,C,A", f"p{p},B,D,B"]
    assert import_comparisons(client, s["id"], lines, privatized=False)["imported"] == 60
    return s


def release(client, sid, **body):
    return client.post(f"/v1/surveys/{sid}/releases", json={"method": "noisy_counts", **body}, headers=ADMIN)


def test_create_with_accounting_and_validation(client, unchanged):
    s = central(client)
    assert s["privacy"]["accounting"] == "zcdp" and s["privacy"]["delta"] == DEFAULT_DELTA == 1e-10
    s = central(client, delta=1e-12)
    assert s["privacy"]["delta"] == 1e-12
    pure = central(client, accounting=None)
    assert pure["privacy"]["accounting"] == "pure" and "delta" not in pure["privacy"]
    local = create_survey(client)["privacy"]  # a local survey's privacy reads as without zCDP
    assert "accounting" not in local and "delta" not in local
    with unchanged():
        for privacy, words in (
            ({**ZCDP, "accounting": "renyi"}, "accounting"),
            ({**ZCDP, "delta": 1e-3}, "delta"),
            ({**ZCDP, "delta": 0}, "delta"),
            ({**ZCDP, "accounting": "pure", "delta": 1e-10}, "delta"),
            ({"model": "local", "accounting": "zcdp"}, "central"),
        ):
            r = client.post(
                "/v1/surveys",
                json={"title": "t", "items": ["A", "B", "C", "D"], "privacy": privacy},
                headers=ADMIN,
            )
            assert r.status_code == 422 and words in r.text, (privacy, r.text)


def test_rho_releases_are_charged_in_rho_and_shown_as_epsilon_delta(client, db, unchanged):
    s = central(client)
    sid = s["id"]
    rho_total = zcdp_rho_for(3.0, 1e-10)
    # Individual: discrete Gaussian of σ = L/√ρ; charged ρ.
    r = release(client, sid, unit="individual", rho=0.02, k=1)
    assert r.status_code == 201, r.text
    a = r.json()
    assert a["parameters"] == {
        "sigma": pytest.approx(L / math.sqrt(0.02)),
        "sensitivity_l2": pytest.approx(math.sqrt(2) * L),
        "noise": "discrete Gaussian",
    }
    assert (a["rho"], a["cost_rho"], a["delta"]) == (0.02, 0.02, 1e-10)
    assert a["epsilon"] == pytest.approx(zcdp_epsilon(0.02, 1e-10)) == a["cost"]
    assert all(isinstance(it["noisy_wins"], int) for it in a["result"]["items"])
    b = a["budget"]
    assert b["accounting"] == "zcdp" and b["delta"] == 1e-10 and b["total"] == 3.0
    assert b["rho_total"] == pytest.approx(rho_total) and b["rho_spent"] == pytest.approx(0.02)
    assert b["spent"] == pytest.approx(zcdp_epsilon(0.02, 1e-10)) and b["remaining"] == pytest.approx(
        3 - b["spent"]
    )
    assert "ρ = 0.02" in a["cost_explanation"] and "δ" in a["cost_explanation"]
    # Edge: ρ per comparison, L²ρ per person.
    r = release(client, sid, unit="edge", rho=0.002)
    assert r.status_code == 201, r.text
    assert r.json()["cost_rho"] == pytest.approx(L * L * 0.002) and r.json()["parameters"][
        "sigma"
    ] == pytest.approx(1 / math.sqrt(0.002))
    assert "3² × 0.002" in r.json()["cost_explanation"]
    # A pure ε-DP release in a zCDP survey: Laplace noise, charged (person-level ε)²/2.
    r = client.post(
        f"/v1/surveys/{sid}/releases",
        json={"method": "perturbed_mle", "unit": "edge", "epsilon": 0.1},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    mle = r.json()
    assert mle["epsilon"] == 0.1 and mle["cost"] == pytest.approx(0.3) and "rho" not in mle
    assert mle["cost_rho"] == pytest.approx(0.3**2 / 2) and mle["parameters"]["noise"] == "Laplace"
    spent = 0.02 + 9 * 0.002 + 0.045
    ledger = client.get(f"/v1/surveys/{sid}/releases", headers=ADMIN).json()
    assert ledger["budget"]["rho_spent"] == pytest.approx(spent)
    assert ledger["budget"]["spent"] == pytest.approx(zcdp_epsilon(spent, 1e-10))
    assert [x["budget_after"] for x in ledger["releases"]] == pytest.approx(
        [3 - zcdp_epsilon(x, 1e-10) for x in (spent, 0.038, 0.02)]
    )
    page = client.get(f"/v1/surveys/{sid}/releases?limit=1&offset=1", headers=ADMIN).json()
    assert page["releases"][0]["budget_after"] == pytest.approx(3 - zcdp_epsilon(0.038, 1e-10))
    again = client.get(f"/v1/surveys/{sid}/releases/{a['id']}", headers=ADMIN).json()
    assert (
        again["budget_after"] == pytest.approx(3 - zcdp_epsilon(0.02, 1e-10))
        and again["result"] == a["result"]
    )
    # Over budget: 409 with its code, nothing spent or stored.
    left = rho_total - spent
    with unchanged():
        r = release(client, sid, unit="individual", rho=left * 1.001)
    assert (
        r.status_code == 409
        and r.json()["code"] == "over_budget"
        and "nothing was spent" in r.json()["detail"]
    )
    assert release(client, sid, unit="individual", rho=left * 0.999).status_code == 201  # what remains fits
    with unchanged():
        assert release(client, sid, unit="individual", rho=0.002 * left).status_code == 409
    budget = client.get(f"/v1/surveys/{sid}/releases", headers=ADMIN).json()["budget"]
    assert budget["spent"] <= 3.0 + 1e-9 and budget["rho_remaining"] == pytest.approx(0.001 * left, abs=1e-9)
    assert db.scalar(select(func.count()).select_from(Release).where(Release.survey_id == sid)) == 4


def test_request_shapes_and_refusals(client, unchanged):
    zsid = central(client)["id"]
    pure = central(client, accounting=None)["id"]
    with unchanged():
        for body in (
            {"unit": "individual"},  # neither
            {"unit": "individual", "epsilon": 1.0, "rho": 0.1},  # both
            {"unit": "individual", "rho": 0},
            {"unit": "individual", "rho": 1e-9},
            {"unit": "individual", "rho": 500},
            {"unit": "individual", "rho": "a lot"},
            {"unit": "individual", "rho": 0.1, "method": "perturbed_mle"},
        ):
            r = release(client, zsid, **body)
            assert r.status_code == 422, (body, r.text)
        r = release(client, pure, unit="individual", rho=0.1)
        assert r.status_code == 409 and r.json()["code"] == "pure_accounting"
    # Idempotency: the same ρ request replays, another one under the same key is refused.
    key = {**ADMIN, "Idempotency-Key": "z1"}
    body = {"method": "noisy_counts", "unit": "individual", "rho": 0.05}
    first = client.post(f"/v1/surveys/{zsid}/releases", json=body, headers=key)
    again = client.post(f"/v1/surveys/{zsid}/releases", json=body, headers=key)
    assert first.status_code == 201 and again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert again.json()["budget"]["rho_spent"] == pytest.approx(0.05)
    with unchanged():
        for other in ({**body, "rho": 0.06}, {**body, "rho": None, "epsilon": 0.05}):
            assert client.post(f"/v1/surveys/{zsid}/releases", json=other, headers=key).status_code == 409


def test_accounting_is_changeable_until_the_first_release(client, db, unchanged):
    sid = central(client, accounting=None)["id"]

    def patch(privacy):
        return client.patch(f"/v1/surveys/{sid}", json={"privacy": privacy}, headers=ADMIN)

    r = patch({"accounting": "zcdp"})
    assert r.status_code == 200 and r.json()["privacy"]["accounting"] == "zcdp"
    assert r.json()["privacy"]["delta"] == DEFAULT_DELTA
    assert patch({"delta": 1e-14}).json()["privacy"]["delta"] == 1e-14
    assert patch({"accounting": "zcdp"}).json()["privacy"]["delta"] == 1e-14  # δ kept
    local = create_survey(client)
    with unchanged():
        assert patch({"delta": 0.01}).status_code == 422
        assert patch({"accounting": "pure", "delta": 1e-10}).status_code == 422
        r = client.patch(
            f"/v1/surveys/{local['id']}", json={"privacy": {"accounting": "zcdp"}}, headers=ADMIN
        )
        assert r.status_code == 422 and "central" in r.text
    r = patch({"accounting": "pure"})
    assert r.json()["privacy"]["accounting"] == "pure" and "delta" not in r.json()["privacy"]
    assert patch({"accounting": "zcdp", "delta": 1e-12}).status_code == 200
    assert release(client, sid, unit="individual", rho=0.01).status_code == 201
    with unchanged():
        for privacy in ({"accounting": "pure"}, {"delta": 1e-10}, {"accounting": "zcdp", "delta": 1e-11}):
            r = patch(privacy)
            assert r.status_code == 409 and r.json()["code"] == "accounting_locked", privacy
            assert "first release" in r.json()["detail"]
    # Asking for what it has is no change; other settings still change.
    r = client.patch(
        f"/v1/surveys/{sid}",
        json={"privacy": {"accounting": "zcdp", "delta": 1e-12}, "title": "Renamed"},
        headers=ADMIN,
    )
    assert r.status_code == 200 and r.json()["title"] == "Renamed"
    db.expire_all()
    row = db.get(Survey, sid)
    assert (row.accounting, row.delta) == ("zcdp", 1e-12)


def test_a_release_computed_while_the_accounting_changed_is_refused(client, app, monkeypatch, db):
    """The accounting is checked again under the survey's lock: a ρ release computed while
    a PATCH switched the survey to pure accounting is not stored (nothing is spent)."""
    from app.releases import service as svc
    from app.surveys import service as surveys

    sid = central(client)["id"]
    real = svc.gaussian_noisy_counts

    def switch_meanwhile(*args, **kwargs):
        out = real(*args, **kwargs)
        with app.state.session_factory() as other:
            surveys.update_survey(other, sid, None, None, accounting="pure")
        return out

    monkeypatch.setattr(svc, "gaussian_noisy_counts", switch_meanwhile)
    r = release(client, sid, unit="individual", rho=0.01)
    assert r.status_code == 409 and r.json()["code"] == "accounting_changed"
    assert db.scalar(select(func.count()).select_from(Release).where(Release.survey_id == sid)) == 0
    assert client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["privacy"]["accounting"] == "pure"


def test_pure_surveys_answer_exactly_as_without_zcdp(client):
    sid = central(client, accounting=None, total_budget=4.0)["id"]
    r = release(client, sid, unit="edge", epsilon=0.5, k=1)
    assert r.status_code == 201
    out = r.json()
    assert set(out) == PURE_RELEASE_KEYS and set(out["budget"]) == PURE_BUDGET_KEYS
    assert out["cost"] == pytest.approx(1.5) and out["budget"] == {
        "total": 4.0,
        "spent": 1.5,
        "remaining": 2.5,
    }
    assert out["parameters"]["noise"] == "discrete Laplace" and out["parameters"]["scale"] == pytest.approx(
        4.0
    )
    ledger = client.get(f"/v1/surveys/{sid}/releases", headers=ADMIN).json()
    assert set(ledger["budget"]) == PURE_BUDGET_KEYS
    assert set(ledger["releases"][0]) == (PURE_RELEASE_KEYS - {"result", "budget"}) | {"top"}
    assert (
        set(client.get(f"/v1/surveys/{sid}/releases/{out['id']}", headers=ADMIN).json()) == PURE_RELEASE_KEYS
    )
    r = release(client, sid, unit="individual", epsilon=3.0)
    assert r.status_code == 409 and "code" not in r.json()  # the refusal as without zCDP: no code


def test_a_year_of_weekly_releases_fits_a_zcdp_budget_that_pure_accounting_exhausts(client):
    """52 weekly individual releases of noisy counts at ε = 1's accuracy (ρ = ε²/8: discrete
    Gaussian noise with the variance 2(2L/ε)² of Laplace noise of scale 2L/ε) fit a zCDP
    budget of ε = 30.5 at δ = 10⁻¹⁰; a pure survey of the same budget stops after 30 of the
    ε = 1 Laplace releases, as basic composition must (52 would cost 52)."""
    year = 52
    z = central(client, total_budget=30.5)["id"]
    for week in range(year):
        r = release(client, z, unit="individual", rho=1 / 8)
        assert r.status_code == 201, (week, r.text)
    budget = r.json()["budget"]
    assert budget["rho_spent"] == pytest.approx(year / 8)
    assert budget["spent"] == pytest.approx(zcdp_epsilon(6.5, 1e-10)) and budget["spent"] < 30.5
    assert budget["spent"] < 0.6 * year  # markedly less than the 52 basic composition charges
    assert r.json()["parameters"]["sigma"] ** 2 == pytest.approx(2 * (2 * L / 1.0) ** 2)
    p = central(client, accounting=None, total_budget=30.5)["id"]
    made = 0
    while (r := release(client, p, unit="individual", epsilon=1.0)).status_code == 201:
        made += 1
    assert made == 30 and r.status_code == 409
