"""The database: engine and sessions, the tables, and migrations."""
