"""The schema exists only through Alembic, and the migrations match the models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from app.core.db.migrate import upgrade
from app.core.db.models import Base
from app.core.db.session import make_engine


def test_migrations_create_exactly_the_models(private_url):
    engine = make_engine(private_url)
    try:
        upgrade(private_url)  # idempotent: already at head
        with engine.connect() as conn:
            diff = compare_metadata(
                MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata
            )
            tables = set(inspect(conn).get_table_names())
        assert diff == []
        assert {t.name for t in Base.metadata.sorted_tables} | {"alembic_version"} == tables
    finally:
        engine.dispose()


def _head() -> str:
    from alembic.script import ScriptDirectory

    from app.core.db.migrate import alembic_config

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def test_upgrade_a_fresh_database_from_nothing(tmp_path):
    url = f"sqlite:///{tmp_path}/fresh.db"
    upgrade(url)
    engine = make_engine(url)
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == _head()
    engine.dispose()


def test_every_migration_downgrades_and_upgrades_again(database_url, tmp_path):
    """Walk the whole history down to nothing and back, on a scratch database of
    the same kind as the suite's."""
    from alembic import command

    from app.core.db.migrate import alembic_config

    if database_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path}/walk.db"
        drop = None
    else:
        from tests.helpers.api import fresh_postgres_database

        url, drop = fresh_postgres_database(database_url.rsplit("/", 1)[0] + "/test")
    try:
        upgrade(url)
        command.downgrade(alembic_config(url), "base")
        upgrade(url)
        engine = make_engine(url)
        with engine.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == _head()
            diff = compare_metadata(
                MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata
            )
        engine.dispose()
        assert diff == []
    finally:
        if drop:
            drop()


def test_sqlite_migrations_keep_existing_data(tmp_path):
    """Batch migrations rebuild tables on SQLite; with foreign keys on, dropping the old
    table would cascade into its children. A database with a survey, its items, a
    respondent and answers keeps every row across the upgrade, and across a downgrade
    back to the first revision."""
    from alembic import command
    from sqlalchemy import text

    from app.core.db.migrate import alembic_config

    url = f"sqlite:///{tmp_path}/data.db"
    upgrade(url, "0001")
    engine = make_engine(url)
    now = "2026-01-01 00:00:00"
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO surveys VALUES ('srv_aaaaaaaaaaaaaaaa', 't', 'pairwise', 'open', 'local', "
                "1.0, 0.1, 5.0, NULL, :t, :t)"
            ),
            {"t": now},
        )
        for k, label in enumerate("abc"):
            conn.execute(
                text("INSERT INTO items VALUES (:id, 'srv_aaaaaaaaaaaaaaaa', :k, :label, :t)"),
                {"id": f"itm_{label * 16}", "k": k, "label": label, "t": now},
            )
        conn.execute(
            text(
                "INSERT INTO respondents VALUES ('rsp_aaaaaaaaaaaaaaaa', 'srv_aaaaaaaaaaaaaaaa', NULL, 1.0, "
                "1.0, 1, NULL, :t)"
            ),
            {"t": now},
        )
        conn.execute(
            text(
                "INSERT INTO comparisons (survey_id, respondent_id, i, j, y_tilde, epsilon, source, "
                "created_at) VALUES ('srv_aaaaaaaaaaaaaaaa', 'rsp_aaaaaaaaaaaaaaaa', 0, 1, 1, 1.0, "
                "'server', :t)"
            ),
            {"t": now},
        )
        conn.execute(
            text("INSERT INTO survey_stats VALUES ('srv_aaaaaaaaaaaaaaaa', 0, 0, NULL, :t)"), {"t": now}
        )
    tables = ("surveys", "items", "respondents", "comparisons", "survey_stats")

    def counts() -> dict:
        with engine.connect() as conn:
            return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in tables}

    before = counts()
    assert before == {"surveys": 1, "items": 3, "respondents": 1, "comparisons": 1, "survey_stats": 1}
    upgrade(url)
    assert counts() == before
    command.downgrade(alembic_config(url), "0001")
    assert counts() == before
    upgrade(url)
    assert counts() == before
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall() == []
    engine.dispose()


def test_sqlite_downgrade_removes_central_surveys_with_their_rows(tmp_path):
    """Downgrading below 0002 deletes central surveys (0001 cannot hold them) and every row
    that depends on them, and nothing of the local surveys; no dangling foreign keys."""
    from alembic import command
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from app.core.db import models
    from app.core.db.migrate import alembic_config

    url = f"sqlite:///{tmp_path}/central.db"
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as s:
        for sid, central in (("srv_aaaaaaaaaaaaaaaa", False), ("srv_bbbbbbbbbbbbbbbb", True)):
            privacy = (
                {"total_budget": 2.0, "max_comparisons": 2}
                if central
                else {"epsilon_default": 1.0, "epsilon_min": 0.1, "epsilon_max": 5.0}
            )
            s.add(
                models.Survey(
                    id=sid,
                    title="t",
                    kind="pairwise",
                    privacy_model="central" if central else "local",
                    **privacy,
                )
            )
            s.add(models.SurveyStats(survey_id=sid, version=0, n_comparisons=0))
            s.flush()
            s.add_all(
                models.Item(id=f"itm_{sid[4]}{k}" + "a" * 14, survey_id=sid, position=k, label=str(k))
                for k in range(2)
            )
            rid = f"rsp_{sid[4] * 16}"
            s.add(models.Respondent(id=rid, survey_id=sid, epsilon=None if central else 1.0))
            s.flush()
            s.add(
                models.Comparison(
                    survey_id=sid,
                    respondent_id=rid,
                    i=0,
                    j=1,
                    y_tilde=1,
                    epsilon=None if central else 1.0,
                    source="central" if central else "server",
                )
            )
            s.add(
                models.IdempotencyRecord(
                    respondent_id=rid, key="k", fingerprint="f", status_code=201, response={}
                )
            )
        s.add(
            models.Release(
                id="rel_aaaaaaaaaaaaaaaa",
                survey_id="srv_bbbbbbbbbbbbbbbb",
                method="noisy_counts",
                unit="edge",
                epsilon=1.0,
                cost=2.0,
                data_version=0,
                parameters={},
                result={},
                top=[],
                created_by="x",
            )
        )
        s.commit()
    command.downgrade(alembic_config(url), "0001")
    with engine.connect() as conn:
        for table in ("surveys", "items", "respondents", "comparisons", "survey_stats", "idempotency_keys"):
            left = conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            assert left == (2 if table == "items" else 1), table  # the local survey's rows only
        assert conn.execute(text("SELECT id FROM surveys")).scalar_one() == "srv_aaaaaaaaaaaaaaaa"
        assert conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall() == []
    engine.dispose()


def test_releases_stored_before_0004_get_their_ledger_items(tmp_path):
    """0004 adds ``top`` (the ledger's first items) and fills it from each stored result."""
    import json

    from alembic import command
    from sqlalchemy import text

    from app.core.db.migrate import alembic_config

    url = f"sqlite:///{tmp_path}/ledger.db"
    command.upgrade(alembic_config(url), "0003")
    items = [{"item_id": f"itm_{k}", "label": str(k), "rank": k + 1, "noisy_wins": 20 - k} for k in range(12)]
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO surveys (id, title, kind, privacy_model, status, total_budget, max_comparisons, "
                "created_at, updated_at) VALUES ('srv_cccccccccccccccc', 't', 'pairwise', 'central', 'open', "
                "2.0, 2, '2026-01-01', '2026-01-01')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO releases (id, survey_id, method, unit, epsilon, cost, data_version, parameters, "
                "result, created_by, created_at) VALUES ('rel_cccccccccccccccc', 'srv_cccccccccccccccc', "
                "'noisy_counts', 'edge', 1.0, 2.0, 0, '{}', :result, 'x', '2026-01-01')"
            ),
            {"result": json.dumps({"items": items, "top_k": None})},
        )
    upgrade(url)
    with engine.connect() as conn:
        top = conn.execute(text("SELECT top FROM releases")).scalar_one()
    engine.dispose()
    assert json.loads(top) == items[:10]


def test_0010_keeps_existing_surveys_pure_and_downgrades_without_returning_budget(tmp_path):
    """0010: a central survey stored before it accounts in pure ε (its ledger unchanged);
    going back down keeps a zCDP survey's releases, whose ``cost`` (the person-level ε each
    guarantees alone) the pure ledger then charges, so no budget comes back."""
    from alembic import command
    from sqlalchemy import text

    from app.core.db.migrate import alembic_config

    url = f"sqlite:///{tmp_path}/accounting.db"
    command.upgrade(alembic_config(url), "0009")
    engine = make_engine(url)
    survey = (
        "INSERT INTO surveys (id, title, kind, privacy_model, status, total_budget, max_comparisons, "
        "created_at, updated_at) VALUES (:id, 't', 'pairwise', 'central', 'open', 3.0, 2, '2026-01-01', "
        "'2026-01-01')"
    )
    release = (
        "INSERT INTO releases (id, survey_id, method, unit, epsilon, cost, data_version, parameters, result, "
        "top, created_by, created_at) VALUES (:id, :sid, 'noisy_counts', 'individual', :eps, :cost, 0, '{}', "
        "'{\"items\": [], \"top_k\": null}', '[]', 'x', '2026-01-01')"
    )
    with engine.begin() as conn:
        conn.execute(text(survey), {"id": "srv_pppppppppppppppp"})
        conn.execute(
            text(release),
            {"id": "rel_pppppppppppppppp", "sid": "srv_pppppppppppppppp", "eps": 1.0, "cost": 1.0},
        )
    upgrade(url)
    with engine.begin() as conn:
        assert conn.execute(text("SELECT accounting, delta FROM surveys")).one() == ("pure", None)
        assert conn.execute(text("SELECT rho, cost_rho, cost FROM releases")).one() == (None, None, 1.0)
        conn.execute(text(survey), {"id": "srv_zzzzzzzzzzzzzzzz"})
        conn.execute(
            text("UPDATE surveys SET accounting = 'zcdp', delta = 1e-10 WHERE id = 'srv_zzzzzzzzzzzzzzzz'")
        )
        conn.execute(
            text(release),
            {"id": "rel_zzzzzzzzzzzzzzzz", "sid": "srv_zzzzzzzzzzzzzzzz", "eps": 0.6, "cost": 0.6},
        )
        conn.execute(
            text("UPDATE releases SET rho = 0.002, cost_rho = 0.002 WHERE id = 'rel_zzzzzzzzzzzzzzzz'")
        )
    command.downgrade(alembic_config(url), "0009")
    with engine.connect() as conn:
        kept = conn.execute(text("SELECT survey_id, cost FROM releases ORDER BY id")).all()
    engine.dispose()
    assert kept == [("srv_pppppppppppppppp", 1.0), ("srv_zzzzzzzzzzzzzzzz", 0.6)]


def test_0011_gives_surveys_taking_suggestions_the_default_batch(tmp_path):
    """0011: a survey that takes suggestions gets ``batch`` 5, its other settings kept; a
    survey without suggestions is left alone; the held table comes and goes."""
    import json

    from alembic import command
    from sqlalchemy import text

    from app.core.db.migrate import alembic_config

    url = f"sqlite:///{tmp_path}/batches.db"
    command.upgrade(alembic_config(url), "0010")
    engine = make_engine(url)
    survey = (
        "INSERT INTO surveys (id, title, kind, privacy_model, status, suggestions, created_at, updated_at) "
        "VALUES (:id, 't', 'pairwise', 'local', 'open', :s, '2026-01-01', '2026-01-01')"
    )
    settings = {"enabled": True, "per_respondent": 2, "moderation": "after", "flag_threshold": 4}
    with engine.begin() as conn:
        conn.execute(text(survey), {"id": "srv_ssssssssssssssss", "s": json.dumps(settings)})
        conn.execute(text(survey), {"id": "srv_nnnnnnnnnnnnnnnn", "s": None})
    upgrade(url)
    with engine.connect() as conn:
        rows = dict(conn.execute(text("SELECT id, suggestions FROM surveys")).all())
        assert "held_contributions" in inspect(conn).get_table_names()
    assert json.loads(rows["srv_ssssssssssssssss"]) == {**settings, "batch": 5}
    assert rows["srv_nnnnnnnnnnnnnnnn"] is None
    command.downgrade(alembic_config(url), "0010")
    with engine.connect() as conn:
        assert "held_contributions" not in inspect(conn).get_table_names()
    engine.dispose()


def test_0014_sends_surveys_with_earlier_answers_to_their_stored_answers(tmp_path):
    """0014: a survey with folded or pending answers (which do not say who gave them) is
    marked as not logged; a survey without answers is logged from its first fold."""
    from alembic import command
    from sqlalchemy import text

    from app.core.db.migrate import alembic_config

    url = f"sqlite:///{tmp_path}/log.db"
    command.upgrade(alembic_config(url), "0013")
    engine = make_engine(url)
    survey = (
        "INSERT INTO surveys (id, title, kind, privacy_model, status, created_at, updated_at) "
        "VALUES (:id, 't', 'pairwise', 'local', 'open', '2026-01-01', '2026-01-01')"
    )
    stats = (
        "INSERT INTO survey_stats (survey_id, version, n_comparisons, updated_at) "
        "VALUES (:id, :v, :n, '2026-01-01')"
    )
    with engine.begin() as conn:
        for sid, version, n in (("srv_folded", 3, 40), ("srv_pending", 0, 0), ("srv_empty", 0, 0)):
            conn.execute(text(survey), {"id": sid})
            conn.execute(text(stats), {"id": sid, "v": version, "n": n})
        conn.execute(
            text("INSERT INTO pending_batches (survey_id, n, payload) VALUES ('srv_pending', 1, :p)"),
            {"p": b"PRB1"},
        )
    upgrade(url)
    with engine.connect() as conn:
        logged = dict(conn.execute(text("SELECT survey_id, answer_log FROM survey_stats")).all())
        assert "answer_log" in inspect(conn).get_table_names()
    assert {k: bool(v) for k, v in logged.items()} == {
        "srv_folded": False,
        "srv_pending": False,
        "srv_empty": True,
    }
    command.downgrade(alembic_config(url), "0013")
    with engine.connect() as conn:
        assert "answer_log" not in inspect(conn).get_table_names()
    engine.dispose()
