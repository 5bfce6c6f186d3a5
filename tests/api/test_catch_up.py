"""New items catch up (app.respondents.assignment._catch_up): an item approved mid-survey reaches
the survey's median comparison count within a stated number of served pairs.

The bound. While the new item is below the median, each served pair is a catch-up pair —
one holding a below-median new item — with probability s = CATCH_UP_SHARE = 1/2, whatever
the strategy does with the others. After T pairs the new item has at least B ~ Binomial(T, s)
comparisons, while the mean count of the m live items rises by 2T/m (two items per pair).
So it has caught up once B ≥ c₀ + 2T/m (c₀: the median when it was approved), which holds
with B at Z = 4.5 standard deviations (σ ≤ √T/2) below its mean once

    T ≥ T* = (c₀ + Z·√T*/2) / (s − 2/m),

solved by iteration. Without catch-up a new item gains 2/m comparisons per pair under
uniform assignment: about c₀·m/2 pairs (800 in the sparse survey below, against T* ≈ 105).

The pairs served are drawn from the test's seeded source: the outcome is the same on
every run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.respondents.assignment import CATCH_UP_SHARE
from tests.helpers.api import ADMIN, import_survey, register
from tests.helpers.stats import Z


def _bound(c0: float, m: int) -> float:
    t = 4 * c0
    for _ in range(50):
        t = (c0 + Z * math.sqrt(t) / 2) / (CATCH_UP_SHARE - 2 / m)
    return t


@pytest.mark.parametrize(
    ("m", "respondents", "per", "label"),
    [
        (60, 80, 10, "sparse: pairs drawn among the never-answered ones"),
        (10, 60, 5, "dense: least-answered pairs first"),
    ],
)
def test_an_approved_item_reaches_the_median_count_within_the_bound(client, m, respondents, per, label):
    sid = import_survey(client, n_items=m, n_respondents=respondents, per=per, seed=m)
    client.patch(
        f"/v1/surveys/{sid}", json={"suggestions": {"moderation": "before", "batch": 2}}, headers=ADMIN
    )
    for label in ("A late idea", "Another late idea"):  # a batch of two respondents'
        _, h = register(client, sid)
        assert (
            client.post(f"/v1/surveys/{sid}/suggestions", json={"label": label}, headers=h).status_code == 202
        )
    queue = client.get(f"/v1/surveys/{sid}/suggestions", headers=ADMIN).json()["suggestions"]
    (pending,) = [q for q in queue if q["label"] == "A late idea"]
    new = client.post(f"/v1/surveys/{sid}/suggestions/{pending['id']}/approve", headers=ADMIN).json()[
        "item_id"
    ]
    ranking = client.get(f"/v1/surveys/{sid}/ranking?uncertainty=none", headers=ADMIN).json()
    counts = {i["item_id"]: i["comparisons"] for i in ranking["items"]}
    assert counts[new] == 0
    c0 = float(np.median([n for k, n in counts.items() if k != new]))
    bound = _bound(c0, m + 1)
    served = 0
    while counts[new] < np.median(list(counts.values())):
        _, h = register(client, sid)
        pairs = client.get(f"/v1/surveys/{sid}/pairs?count=5", headers=h).json()["pairs"]
        assert pairs
        answers = [{"a": p["a"], "b": p["b"], "winner": p["a"]} for p in pairs]
        r = client.post(
            f"/v1/surveys/{sid}/responses", json={"privatized": False, "comparisons": answers}, headers=h
        )
        assert r.status_code in (200, 201), r.text
        for p in pairs:
            counts[p["a"]] += 1
            counts[p["b"]] += 1
        served += len(pairs)
        assert served <= bound, (label, served, bound, counts[new], c0)
    # The counts kept here are the service's own.
    ranking = client.get(f"/v1/surveys/{sid}/ranking?uncertainty=none", headers=ADMIN).json()
    assert {i["item_id"]: i["comparisons"] for i in ranking["items"]} == counts
    print(
        f"{label}: m = {m + 1}, median {c0:g} at approval, caught up after {served} pairs (bound {bound:.0f})"
    )


def test_catch_up_stops_at_the_median(client):
    """An item already at the median gets no preference: catch-up is for young items only."""
    sid = import_survey(client, n_items=60, n_respondents=80, per=10, seed=5)
    r = client.post(f"/v1/surveys/{sid}/items", json={"items": ["Added by an admin"]}, headers=ADMIN)
    new = r.json()[0]["id"]
    assert r.json()[0]["source"] == "added"
    ranking = client.get(f"/v1/surveys/{sid}/ranking?uncertainty=none", headers=ADMIN).json()
    median = float(np.median([i["comparisons"] for i in ranking["items"] if i["item_id"] != new]))
    # Give the new item the median count by hand (an import of answers about it).
    lines = ["respondent,item_a,item_b,winner,epsilon"]
    others = [i["label"] for i in ranking["items"] if i["item_id"] != new]
    for k in range(int(median) + 1):
        lines.append(f"bulk{k},Added by an admin,{others[k % len(others)]},Added by an admin,2.0")
    r = client.post(
        f"/v1/surveys/{sid}/comparisons/import?privatized=false",
        content=("\n".join(lines) + "\n").encode(),
        headers={**ADMIN, "Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    hits = total = 0
    for _ in range(40):
        _, h = register(client, sid)
        pairs = client.get(f"/v1/surveys/{sid}/pairs?count=5", headers=h).json()["pairs"]
        hits += sum(new in (p["a"], p["b"]) for p in pairs)
        total += len(pairs)
    # Without catch-up the sparse strategy draws among the never-answered pairs: at least
    # 1,830 − 800 − (median + 1) ≥ 1,000 of them, of which the new item's are at most 60,
    # so it is in a served pair with probability p ≤ 0.06 (about 2/m); catch-up would put
    # it in about half of them (≈ 100 of the 200).
    p = 60 / 1000
    assert total == 200 and hits <= total * p + Z * math.sqrt(total * p * (1 - p)), (hits, total)
