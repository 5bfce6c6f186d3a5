"""Shared plumbing of every domain: settings, the database, errors, authentication,
limits, admission, caches and the write path of answers."""
