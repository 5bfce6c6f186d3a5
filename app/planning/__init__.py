"""Planning: how many respondents and answers a survey needs, and what a goal saves."""
