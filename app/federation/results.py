"""Federated rounds, as the admin and as each site see them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RoundSiteOut(BaseModel):
    name: str
    position: int
    joined: bool = Field(description="The site registered its public key.")
    contributed: bool
    privatization: Literal["mallows", "none"] | None = Field(
        None,
        description="What the site declared with its contribution: 'mallows' (each local ranking replaced "
        "by a Mallows copy at 'epsilon') or 'none'; null before it contributes. The site's own claim: the "
        "server cannot verify it.",
    )
    epsilon: float | None = Field(None, description="The ε the site declared with 'mallows'.")
    token: str | None = Field(None, description="The site's credential: shown once, when the round opens.")


class RoundPrivacy(BaseModel):
    """The sites' declarations summed up (the server sees masked messages and cannot verify them)."""

    all_privatized: bool = Field(
        description="Every site has contributed and declared the Mallows mechanism (ε-ranking DP per local "
        "ranking)."
    )
    epsilon_max: float | None = Field(
        description="The largest ε any site declared with 'mallows' (null if none did)."
    )
    statement: str = Field(
        description="The round's privacy in words, naming the sites that did not privatize."
    )


class RoundOut(BaseModel):
    id: str
    survey_id: str
    method: str
    status: Literal["open", "complete", "cancelled"]
    parameters: dict = Field(description="The public parameters every site uses (items, φ, layout).")
    sites: list[RoundSiteOut]
    privacy: RoundPrivacy = Field(description="What the sites declared about privatizing their rankings.")
    result: dict | None = Field(
        description="When complete: the consensus ordering ('order'), per item its 'rank' (tied items "
        "share one: competition ranking) and statistics (Borda: 'mean_site_quantized_position', the "
        "average over sites of each site's quantized mean position, every site weighted equally; "
        "Lehmer: 'lehmer_code'), the summed message ('aggregate'), the groups of exactly tied items "
        "in rank order ('ties', size >= 2), how ties were broken in the published order "
        "('tie_break'; Lehmer also 'random_coordinates') and the sites' declarations when it was "
        "published ('privacy', as above; absent from rounds completed before sites declared)."
    )
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
                    "privacy": {
                        "all_privatized": False,
                        "epsilon_max": None,
                        "statement": "no site has contributed yet; each site declares with its contribution "
                        "whether it privatized its local rankings (privrank site contribute --epsilon)",
                    },
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
    privatization: Literal["mallows", "none"] | None = Field(None, description="As in a round's sites.")
    epsilon: float | None = None


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
    privacy: RoundPrivacy = Field(description="What the sites declared about privatizing their rankings.")
    result: dict | None = Field(
        description="When complete: the published result, as in the round's 'result'."
    )

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
                    "privacy": {
                        "all_privatized": False,
                        "epsilon_max": None,
                        "statement": "no site has contributed yet; each site declares with its contribution "
                        "whether it privatized its local rankings (privrank site contribute --epsilon)",
                    },
                    "result": None,
                }
            ]
        }
    )
