"""Use cases of the service, callable without HTTP: each takes a SQLAlchemy session."""
