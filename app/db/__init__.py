"""Persistence: SQLAlchemy models, engine/session factory, migrations runner."""
