"""Helpers the tests share (fixtures stay in the conftest files; what a test imports
lives here): statistics assertions, API calls, live servers, fault-test clusters,
browser pages, consistency checks and the survey planner's direct simulation."""
