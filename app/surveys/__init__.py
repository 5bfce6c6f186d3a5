"""Surveys: creating, reading and changing them, their items, languages and embedding."""
