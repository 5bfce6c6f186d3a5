"""Ranking questions: surveys whose respondents rank the items, and ballot imports."""
