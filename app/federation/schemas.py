"""Federated rounds and the sites' view."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from ..core.schemas import StrictModel

# -- federated rounds ------------------------------------------------------------

SiteName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]


class RoundCreate(StrictModel):
    method: Literal["borda", "lehmer"] = Field(
        description="borda: Borda FRA (Algorithm 2); lehmer: Lehmer FRA (Algorithm 3)."
    )
    sites: list[SiteName] = Field(
        min_length=2, max_length=100, description="The participating sites' names (unique)."
    )
    phi: float = Field(
        0.6,
        gt=0,
        le=0.95,
        description="Public Mallows dispersion φ: Borda's quantization centroids, Lehmer's number of low "
        "bits (Lehmer needs φ + φ² < 1 + φ^N, about φ ≤ 0.618). The paper uses 0.6 on real data.",
    )
    max_rankings: int = Field(
        1_000_000,
        ge=1,
        le=10**12,
        description="Lehmer: public upper bound M on the total number of rankings.",
    )
    failure_probability: float = Field(
        0.01, gt=0, lt=1, description="Lehmer: ε of eq. (5), the allowed failure probability."
    )
    allow_two_sites: bool = Field(
        False,
        description="A round of two sites must say so: each site can subtract its own message from the "
        "published aggregate and so learns the other's.",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"method": "borda", "sites": ["north", "south", "east"], "phi": 0.6}]
        },
    )


class SiteKeyIn(StrictModel):
    public_key: str = Field(
        min_length=43, max_length=44, description="The site's X25519 public key, base64url (32 bytes)."
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"public_key": "q83vEjVL0m6ZpTz1yqXlG9rE2wV4a1hB8cDf3kLmN0o"}]},
    )


class ContributionIn(StrictModel):
    masked: list[Annotated[int, Field(ge=0)]] = Field(
        min_length=1,
        max_length=1_000_000,
        description="The masked message: entry k is (y_k + z_k) mod 2^{b_k}, with the layout and widths b_k "
        "that the round's public parameters define (app.stats.federated.FederatedScheme).",
    )
    privatization: Literal["mallows", "none"] = Field(
        description="What the site did to its local rankings before computing the message: 'mallows' (each "
        "replaced by a Mallows copy at 'epsilon', ε-ranking DP) or 'none'. Recorded and shown with the "
        "round; the server cannot verify it."
    )
    epsilon: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="With 'mallows': the ε of the Mallows mechanism, within the bounds of a survey's ε "
        "([0.001, 30]); absent with 'none'.",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"masked": [91, 7, 412], "privatization": "mallows", "epsilon": 2.0},
                {"masked": [91, 7, 412], "privatization": "none"},
            ]
        },
    )
