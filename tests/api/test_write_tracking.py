"""The write counts behind ``unchanged()`` (tests.helpers.api.track_writes) see every
committed insert, update and delete, per table, and nothing rolled back or matched by
no row: on SQLite and on PostgreSQL, whichever the suite runs on."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, update

from app.core.db.models import Survey
from tests.helpers.api import create_survey, writes


def _changed(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {name: after[name] - before[name] for name in before if after[name] != before[name]}


def test_each_kind_of_committed_write_is_counted_on_its_table(client, app):
    before = writes(app)
    sid = create_survey(client)["id"]
    created = writes(app)
    assert created["surveys"] > before["surveys"]
    assert created["items"] > before["items"]
    with app.state.session_factory() as session, session.begin():
        session.execute(update(Survey).where(Survey.id == sid).values(title="renamed"))
    updated = writes(app)
    assert _changed(created, updated) == {"surveys": 1}
    with app.state.session_factory() as session, session.begin():
        session.execute(delete(Survey).where(Survey.id == sid))
    deleted = writes(app)
    assert deleted["surveys"] == updated["surveys"] + 1


def test_an_update_back_to_the_same_value_is_a_write(client, app):
    """Unlike a digest of the rows, a count sees a write that leaves the values as they were."""
    sid = create_survey(client)["id"]
    before = writes(app)
    with app.state.session_factory() as session, session.begin():
        title = session.get(Survey, sid).title
        session.execute(update(Survey).where(Survey.id == sid).values(title=title))
    assert _changed(before, writes(app)) == {"surveys": 1}


def test_rolled_back_writes_and_writes_of_no_row_are_not_counted(client, app, unchanged):
    sid = create_survey(client)["id"]
    with unchanged():
        with app.state.session_factory() as session:
            session.execute(update(Survey).where(Survey.id == sid).values(title="never"))
            session.rollback()
        with app.state.session_factory() as session, session.begin():
            session.execute(update(Survey).where(Survey.id == "srv_none").values(title="no row"))


def test_unchanged_fails_on_a_write(client, app, unchanged):
    sid = create_survey(client)["id"]
    with (
        pytest.raises(AssertionError, match=r"changed the database: \['surveys'\]"),
        unchanged(),
        app.state.session_factory() as session,
        session.begin(),
    ):
        session.execute(update(Survey).where(Survey.id == sid).values(title="changed"))
