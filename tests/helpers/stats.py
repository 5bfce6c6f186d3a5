"""Statistical assertions.

Statistical assertions use a z-score of 4.5 unless a test says otherwise: for a
correct implementation a seeded test then fails with probability < 7e-6 over
seeds, so a failure means the code is wrong, not that the seed was unlucky (and a
seeded test gives the same outcome on every run).

A test marked ``os_random`` draws from the OS CSPRNG and cannot be seeded: it uses
:data:`Z_OS` (two-sided P(|N(0, 1)| > 5.5) = 3.8e-8 per check) and p-value thresholds
of :data:`P_OS`, so that it fails by chance with probability below 1e-6 per run.
"""

from __future__ import annotations

import numpy as np

Z = 4.5

#: The z-score of a check on draws from the OS CSPRNG (unseedable): 3.8e-8 per check.
Z_OS = 5.5

#: The smallest p-value a test on draws from the OS CSPRNG accepts: 1e-8 per check.
P_OS = 1e-8


def assert_close_mc(observed: float, expected: float, se: float, z: float = Z, what: str = "") -> None:
    """|observed − expected| ≤ z·se, with se the Monte Carlo standard error."""
    assert se > 0, "standard error must be positive"
    dev = abs(observed - expected) / se
    assert dev <= z, f"{what}: observed {observed:.6g}, expected {expected:.6g} ± {z}·{se:.3g} ({dev:.2f} se)"


def binomial_se(n: int, p: float) -> float:
    """Standard error of a binomial proportion."""
    return float(np.sqrt(p * (1 - p) / n))


def full_validation() -> bool:
    """``PRIVRANK_VALIDATION=full``: the validation tier runs at its full size."""
    import os

    return os.environ.get("PRIVRANK_VALIDATION", "").lower() == "full"


def size(ci: int, full: int) -> int:
    """The size of a Monte Carlo study of the ``validation`` tier: ``ci`` in the ordinary
    run (the README's test command and CI), ``full`` with ``PRIVRANK_VALIDATION=full``
    (``PRIVRANK_VALIDATION=full .venv/bin/pytest -m validation``). A tolerance is derived
    from the size actually run (k·SE), never fixed at the full size's figure."""
    return full if full_validation() else ci
