"""Federated rounds and the sites' view."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from .common import StrictModel

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


class RoundSiteOut(BaseModel):
    name: str
    position: int
    joined: bool = Field(description="The site registered its public key.")
    contributed: bool
    token: str | None = Field(None, description="The site's credential: shown once, when the round opens.")


class RoundOut(BaseModel):
    id: str
    survey_id: str
    method: str
    status: Literal["open", "complete", "cancelled"]
    parameters: dict = Field(description="The public parameters every site uses (items, φ, layout).")
    sites: list[RoundSiteOut]
    result: dict | None = Field(description="When complete: the consensus ordering and the aggregate.")
    created_at: datetime
    ended_at: datetime | None

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "rnd_a2b3c4d5e6f7g2h3",
                    "survey_id": "srv_k3j9x2mqa7b4c5d6",
                    "method": "borda",
                    "status": "open",
                    "parameters": {"method": "borda", "n_items": 3, "n_sites": 2, "phi": 0.6},
                    "sites": [
                        {
                            "name": "north",
                            "position": 0,
                            "joined": False,
                            "contributed": False,
                            "token": "sit_a2b3c4d5e6f7g2h3.Xy…",
                        },
                        {
                            "name": "south",
                            "position": 1,
                            "joined": False,
                            "contributed": False,
                            "token": "sit_h3g2f7e6d5c4b3a2.Qz…",
                        },
                    ],
                    "result": None,
                    "created_at": "2026-11-21T10:00:00Z",
                    "ended_at": None,
                }
            ]
        }
    )


class RoundList(BaseModel):
    rounds: list[RoundOut] = Field(description="This page of rounds, newest first.")
    total: int = Field(description="How many rounds the survey has.")


class SitePeer(BaseModel):
    name: str
    position: int
    public_key: str | None
    contributed: bool


class SiteView(BaseModel):
    round_id: str
    survey_id: str
    site: str
    position: int
    status: Literal["open", "complete", "cancelled"]
    parameters: dict
    peers: list[SitePeer] = Field(description="Every site of the round, with its public key once joined.")
    ready: bool = Field(description="Every site has joined: contributions are accepted.")
    contributed: bool
    result: dict | None

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "round_id": "rnd_a2b3c4d5e6f7g2h3",
                    "survey_id": "srv_k3j9x2mqa7b4c5d6",
                    "site": "north",
                    "position": 0,
                    "status": "open",
                    "parameters": {"method": "borda", "n_items": 3, "n_sites": 2, "phi": 0.6},
                    "peers": [
                        {"name": "north", "position": 0, "public_key": "q83v…", "contributed": False},
                        {"name": "south", "position": 1, "public_key": None, "contributed": False},
                    ],
                    "ready": False,
                    "contributed": False,
                    "result": None,
                }
            ]
        }
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

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"masked": [91, 7, 412]}]})
