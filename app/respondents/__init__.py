"""Respondents: registration, the pairs they are served, their answers and "can't decide"."""
