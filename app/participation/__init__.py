"""Participatory surveys: suggestions, moderation and results for everyone."""
