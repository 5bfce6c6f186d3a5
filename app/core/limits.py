"""Size limits, each written once: the request schemas, the settings and the services
all read them from here, so that no schema bound sits below a setting's ceiling (which
would make a larger setting silently do nothing)."""

from __future__ import annotations

__all__ = [
    "MAX_BATCH",
    "MAX_BATCH_CEILING",
    "MAX_IMPORT_RANKINGS",
    "MAX_IMPORT_RANKING_ENTRIES",
    "MAX_ITEMS",
    "MAX_ITEMS_STORED",
    "MAX_LABEL",
    "MAX_RANKING_ITEMS",
]

#: Items of a survey, archived ones not counted (each request that creates or adds them is
#: checked too).
MAX_ITEMS = 10_000
#: Items a survey stores, archived ones included: positions keep growing when items are
#: archived and others added, and serving a pair is O(positions).
MAX_ITEMS_STORED = 5 * MAX_ITEMS
#: Items of a ranking survey (a respondent ranks all of them; the Mallows sampler is O(m²)).
MAX_RANKING_ITEMS = 256
#: Rankings of one ballot import (POST …/rankings/import), and rankings × items: every
#: imported ranking is held whole, completed and privatized before the write.
MAX_IMPORT_RANKINGS = 100_000
MAX_IMPORT_RANKING_ENTRIES = 5_000_000
#: Characters of an item label.
MAX_LABEL = 500
#: Comparisons per POST …/responses: the default of PRIVRANK_MAX_BATCH, and the most it
#: may be set to (the request schema accepts up to the ceiling; the setting decides).
MAX_BATCH = 1_000
MAX_BATCH_CEILING = 100_000
