"""Fault-injection fixtures (the helpers: ``tests.helpers.faults``)."""

from __future__ import annotations

import pytest

from tests.helpers.faults import PrivatePostgres


@pytest.fixture
def private_postgres():
    """A running throw-away cluster; stopped and removed afterwards."""
    pg = PrivatePostgres()
    try:
        pg.start()
        yield pg
    finally:
        pg.cleanup()
