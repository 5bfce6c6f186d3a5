"""``python -m app.cli``: the ``privrank`` command."""

import sys

from . import run

sys.exit(run())
