"""Analysis: rankings, intervals and exports, from the statistics kept as answers arrive."""
