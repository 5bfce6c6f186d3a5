"""Where the files privrank ships beside its code are: the pages (``static/``) and the
Alembic migrations (``migrations/``).

In the source tree (and an editable install) they sit at the top of the repository; a
regular install (``pip install .``) carries them inside the package, as ``app/static`` and
``app/migrations`` (pyproject.toml maps them there).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["shipped"]

_PACKAGE = Path(__file__).resolve().parents[1]  # app/


def shipped(name: str) -> Path:
    """The directory ``name`` ("static" or "migrations"): inside the installed package when
    it is there, else at the top of the source tree."""
    inside = _PACKAGE / name
    return inside if inside.is_dir() else _PACKAGE.parent / name
