"""Statistical core of privrank: pure NumPy/SciPy, no web or database imports.

The stable API (docs/README.md §3, "Code map") is re-exported here::

    from app.stats import privatize, debias, fit_debiased_mle, kendall_tau_error, top_k_error
"""

from .btl import BTLFit, FitOptions, default_lambda, fit_btl, objective
from .mechanisms import (
    debias,
    flip_probability,
    laplace_privatize,
    privacy_noise_variance,
    privatize,
    rr_probability,
    z_variance,
)
from .metrics import (
    competition_ranks,
    kendall_tau_error,
    l2_error,
    linf_error,
    tie_groups,
    top_k_error,
    top_k_membership,
)
from .mle import (
    fit_debiased_mle,
    fit_debiased_mle_stats,
    fit_laplace_mle,
    fit_naive_mle,
    fit_naive_mle_stats,
)
from .pairs import PairStats, pair_stats
from .theory import SCHEMES, G, H, dividing_line_epsilon, scheme_epsilon

__all__ = [
    "SCHEMES",
    "BTLFit",
    "FitOptions",
    "G",
    "H",
    "PairStats",
    "competition_ranks",
    "debias",
    "default_lambda",
    "dividing_line_epsilon",
    "fit_btl",
    "fit_debiased_mle",
    "fit_debiased_mle_stats",
    "fit_laplace_mle",
    "fit_naive_mle",
    "fit_naive_mle_stats",
    "flip_probability",
    "kendall_tau_error",
    "l2_error",
    "laplace_privatize",
    "linf_error",
    "objective",
    "pair_stats",
    "privacy_noise_variance",
    "privatize",
    "rr_probability",
    "scheme_epsilon",
    "tie_groups",
    "top_k_error",
    "top_k_membership",
    "z_variance",
]
