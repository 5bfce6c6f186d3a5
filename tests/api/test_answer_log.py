"""The answer log: rankings read the cluster-robust sums it keeps, and they are those of
the stored answers.

The reference is the same ranking computed by reading every stored answer from
``comparisons`` (the path of surveys whose answers predate the log): intervals equal to
1e-9 of their scale (rounding; see tests/stats/test_clusters.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select

from app.analysis import fits
from app.analysis.aggregation import decode_batch, encode_batch
from app.core.db.models import AnswerLog, SurveyStats
from app.respondents import ingestion
from tests.helpers.api import ADMIN, import_survey, register

EXACT = 1e-9


def _ranking(client, sid: str) -> dict:
    r = client.get(f"/v1/surveys/{sid}/ranking?k=3", headers=ADMIN)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["uncertainty"]["available"], body["uncertainty"]
    return body


def _from_comparisons(client, monkeypatch, sid: str) -> dict:
    """The ranking from a fresh cache that reads every stored answer instead of the log."""
    kept = client.app.state.fit_cache
    fresh = fits.FitCache()
    monkeypatch.setattr(fresh.log, "read", lambda *args: None)
    client.app.state.fit_cache = fresh
    try:
        return _ranking(client, sid)
    finally:
        client.app.state.fit_cache = kept


def _same(got: dict, want: dict) -> None:
    assert [x["item_id"] for x in got["items"]] == [x["item_id"] for x in want["items"]]
    assert got["uncertainty"]["method"] == want["uncertainty"]["method"]
    assert got["uncertainty"]["n_clusters"] == want["uncertainty"]["n_clusters"]
    a = np.array([[x["score"], x["se"], *x["ci"]] for x in got["items"]])
    b = np.array([[x["score"], x["se"], *x["ci"]] for x in want["items"]])
    assert float(np.abs(a - b).max()) <= EXACT * float(np.abs(b).max())
    assert [x["rank_ci"] for x in got["items"]] == [x["rank_ci"] for x in want["items"]]
    # The respondents' spend and answers, from the log's sums and from their rows.
    a, b = got["diagnostics"], want["diagnostics"]
    assert a["comparisons_per_respondent"] == b["comparisons_per_respondent"]
    assert a["respondent_epsilon_total"] == pytest.approx(b["respondent_epsilon_total"], rel=1e-12)


def _answer(client, sid, headers, items, pairs, rng):
    body = {
        "privatized": False,
        "comparisons": [
            {"a": items[a], "b": items[b], "winner": items[a if rng.random() < 0.6 else b]} for a, b in pairs
        ],
    }
    r = client.post(f"/v1/surveys/{sid}/responses", json=body, headers=headers)
    assert r.status_code == 201, r.text


def test_rankings_read_the_log_and_equal_the_rankings_of_the_stored_answers(client, db, monkeypatch):
    """An imported survey, then respondents answering through the API — some of them
    again after a ranking was read (their earlier answers change the sums): after each
    step the fresh ranking equals the one computed from every stored answer, and the log
    holds every folded answer."""
    sid = import_survey(client, 8, 70, 10, seed=3)

    def no_rereading(*args, **kwargs):
        raise AssertionError("a survey with a complete log never rereads its stored answers")

    monkeypatch.setattr(client.app.state.fit_cache.rows, "read", no_rereading)
    items = [it["id"] for it in client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["items"]]
    rng = np.random.default_rng(8)
    pairs = [(a, b) for a in range(8) for b in range(a + 1, 8)]
    _same(_ranking(client, sid), _from_comparisons(client, monkeypatch, sid))
    people = [register(client, sid, 1.0)[1] for _ in range(6)]
    order = [rng.permutation(len(pairs)) for _ in people]
    for step in range(3):
        for who, headers in enumerate(people):
            part = order[who][step * 5 : step * 5 + 5]
            _answer(client, sid, headers, items, [pairs[k] for k in part], rng)
        _same(_ranking(client, sid), _from_comparisons(client, monkeypatch, sid))
    state = db.scalars(select(SurveyStats).where(SurveyStats.survey_id == sid)).one()
    db.refresh(state)
    logged = db.scalars(select(AnswerLog).where(AnswerLog.survey_id == sid)).all()
    assert state.answer_log
    assert sum(x.n for x in logged) == state.n_comparisons == 70 * 10 + 6 * 15
    assert sorted(x.version for x in logged) == list(range(1, state.version + 1))
    assert all(decode_batch(x.payload).respondents for x in logged)


def test_a_batch_that_does_not_say_who_answered_restarts_the_log(client, db, monkeypatch):
    """A pending batch written without its respondents (by a release before the log) ends
    the survey's log at its fold; while such a batch waits, the log cannot start again and
    rankings read the stored answers; once it is folded, the next ranking starts the log
    again with one entry holding every folded answer. Every ranking stays right."""
    from app.analysis.aggregation import fold_pending
    from app.analysis.answer_log import start_log

    sid = import_survey(client, 6, 40, 6, seed=5)
    items = [it["id"] for it in client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["items"]]
    first = _ranking(client, sid)

    def without_respondents(*args, respondents=(), who=None, **kwargs):
        return encode_batch(*args, **kwargs)

    state = db.scalars(select(SurveyStats).where(SurveyStats.survey_id == sid)).one()
    with monkeypatch.context() as patch:
        patch.setattr(ingestion, "encode_batch", without_respondents)
        _, headers = register(client, sid, 1.0)
        _answer(client, sid, headers, items, [(0, 1), (2, 3)], np.random.default_rng(1))
        db.rollback()  # a new snapshot (SQLite keeps a read transaction's)
        fold_pending(db, sid)
        db.rollback()
        db.refresh(state)
        assert not state.answer_log
        _answer(client, sid, headers, items, [(1, 5)], np.random.default_rng(1))
    assert not start_log(db, sid)  # the batch waiting does not say who answered
    after = _ranking(client, sid)  # folds it, then starts the log again
    db.rollback()
    db.refresh(state)
    assert state.answer_log
    logged = db.scalars(select(AnswerLog).where(AnswerLog.survey_id == sid)).all()
    restarted = state.version
    assert [(x.version, x.n) for x in logged] == [(restarted, state.n_comparisons)]
    assert after["diagnostics"]["comparisons"] == first["diagnostics"]["comparisons"] + 3
    _same(after, _from_comparisons(client, monkeypatch, sid))
    # Answers after the restart are logged fold by fold again.
    _, headers = register(client, sid, 1.0)
    _answer(client, sid, headers, items, [(0, 2), (3, 5)], np.random.default_rng(2))
    _same(_ranking(client, sid), _from_comparisons(client, monkeypatch, sid))
    db.rollback()
    logged_versions = db.scalars(select(AnswerLog.version).where(AnswerLog.survey_id == sid)).all()
    assert logged_versions == [restarted, restarted + 1]


def test_a_survey_answered_before_the_log_starts_it_with_answers_waiting(client, db, monkeypatch):
    """A survey whose folded answers are not logged (as after the upgrade that adds the
    log) starts its log at the next ranking, leaving out the answers that still wait in
    pending batches (those are logged by their own fold)."""
    from app.core.db.models import PendingBatch

    sid = import_survey(client, 6, 30, 5, seed=6)
    items = [it["id"] for it in client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["items"]]
    _ranking(client, sid)
    state = db.scalars(select(SurveyStats).where(SurveyStats.survey_id == sid)).one()
    state.answer_log = False
    for row in db.scalars(select(AnswerLog).where(AnswerLog.survey_id == sid)):
        db.delete(row)
    db.commit()
    _, headers = register(client, sid, 1.0)
    _answer(client, sid, headers, items, [(0, 1), (2, 4)], np.random.default_rng(3))
    assert db.scalar(select(PendingBatch.id).where(PendingBatch.survey_id == sid)) is not None
    from app.analysis.answer_log import start_log

    assert start_log(db, sid)
    db.refresh(state)
    logged = db.scalars(select(AnswerLog).where(AnswerLog.survey_id == sid)).all()
    assert [(x.version, x.n) for x in logged] == [(state.version, 30 * 5)]
    _same(_ranking(client, sid), _from_comparisons(client, monkeypatch, sid))


def test_pending_batches_round_trip_with_their_respondents():
    i, j = np.array([0, 1, 2]), np.array([3, 2, 4])
    y, eps = np.array([1, 0, 1], dtype=np.int8), np.array([1.0, 0.5, 2.0])
    payload = encode_batch(i, j, y, eps, respondents=["r_a", "r_b"], who=np.array([1, 0, 1]))
    batch = decode_batch(payload)
    assert batch.respondents == ("r_a", "r_b") and batch.who.tolist() == [1, 0, 1]
    assert batch.i.tolist() == [0, 1, 2] and batch.epsilon.tolist() == [1.0, 0.5, 2.0]
    assert decode_batch(encode_batch(i, j, y, eps)).respondents is None
    with pytest.raises(ValueError, match="corrupt"):
        decode_batch(payload[:-1])
    with pytest.raises(ValueError, match="corrupt"):
        decode_batch(encode_batch(i, j, y, eps, respondents=["r_a"], who=np.array([0, 1, 0])))


class _Stop(Exception):
    pass


def test_a_read_stopped_by_its_deadline_keeps_the_folds_it_added(client, db, monkeypatch):
    """Catching up a fold at a time (one per chunk here): stopped after two chunks, the
    store keeps those folds, and the next read goes on from there to the same sums as a
    store that read everything at once."""
    from app.analysis import answer_log
    from app.analysis.aggregation import fold_pending
    from app.core.cache import ByteLRU

    sid = import_survey(client, 6, 30, 5, seed=2)
    items = [it["id"] for it in client.get(f"/v1/surveys/{sid}", headers=ADMIN).json()["items"]]
    rng = np.random.default_rng(4)
    for pairs in ([(0, 1), (2, 3)], [(1, 4), (0, 5)], [(2, 5), (3, 4)]):
        _, headers = register(client, sid, 1.0)
        _answer(client, sid, headers, items, pairs, rng)
        fold_pending(db, sid)
    db.commit()
    monkeypatch.setattr(answer_log, "_READ_CHUNK", 1)
    store = answer_log.AnswerLogStore(ByteLRU(2**30))
    calls = []

    def stop_at_third():
        calls.append(1)
        if len(calls) == 3:
            raise _Stop

    with pytest.raises(_Stop):
        store.read(db, sid, stop_at_third)
    partial = store._lru.get(("answer_log", sid))
    assert partial is not None and partial.version == 2
    version, moments = store.read(db, sid)
    whole = answer_log.AnswerLogStore(ByteLRU(2**30)).read(db, sid)
    assert whole is not None and version == whole[0] == 3  # the import folds with the first answers
    theta = rng.normal(size=6)
    assert moments.n_rows == whole[1].n_rows == 30 * 5 + 6
    assert np.allclose(moments.meat(theta), whole[1].meat(theta), rtol=0, atol=EXACT)


def test_respondent_codes_follow_first_appearance_across_reads():
    from app.analysis.answer_log import _Codes

    codes = _Codes()
    assert codes.of(["rsp_b", "rsp_a", "rsp_b"]).tolist() == [0, 1, 0]
    assert codes.of(["rsp_c", "rsp_a", "rsp_0", "rsp_c"]).tolist() == [2, 1, 3, 2]
    assert codes.of(["rsp_0", "rsp_b"]).tolist() == [3, 0]
    assert len(codes) == 4


def test_sums_larger_than_the_cache_are_rebuilt_and_said_once(client, db, caplog):
    """A cache too small for a survey's sums still gives right sums (rebuilt at each read)
    and says so once in the log, naming the setting to raise."""
    import logging

    from app.analysis.answer_log import AnswerLogStore
    from app.core.cache import ByteLRU

    sid = import_survey(client, 6, 20, 5, seed=1)
    _ranking(client, sid)  # folds the import
    db.rollback()
    tiny = AnswerLogStore(ByteLRU(1000))
    roomy = AnswerLogStore(ByteLRU(2**30))
    with caplog.at_level(logging.WARNING, logger="privrank.analysis"):
        first, second = tiny.read(db, sid), tiny.read(db, sid)
    whole = roomy.read(db, sid)
    assert first is not None and second is not None and whole is not None
    assert first[1].n_rows == second[1].n_rows == whole[1].n_rows == 100
    warned = [r.getMessage() for r in caplog.records if "PRIVRANK_ANALYSIS_CACHE_MB" in r.getMessage()]
    assert len(warned) == 1 and sid in warned[0]


def test_the_state_takes_what_the_capacity_page_says(client, db):
    """docs/capacity.md's formula (answer_log.state_bytes) against what the store counts:
    they differ by the per-pair statistics only (seven numbers per observed pair)."""
    from app.analysis.answer_log import AnswerLogStore, state_bytes
    from app.core.cache import ByteLRU

    sid = import_survey(client, 12, 300, 20, seed=9)
    _ranking(client, sid)
    db.rollback()
    store = AnswerLogStore(ByteLRU(2**30))
    _, moments = store.read(db, sid)
    counted = store._lru.get(("answer_log", sid)).size()
    formula = state_bytes(12, moments.n_rows, moments.n_clusters)
    assert formula <= counted <= formula + 7 * 8 * moments.stats.n_pairs + 4096
