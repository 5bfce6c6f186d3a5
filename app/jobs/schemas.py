"""Jobs: long analyses run outside the request (app.jobs.service)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from ..analysis.bootstrap import BOOTSTRAP_MAX_REPLICATES, BOOTSTRAP_MIN_REPLICATES, BOOTSTRAP_REPLICATES
from ..core.schemas import StrictModel
from ..stats.planner import MAX_PLAN_ITEMS, MAX_PLAN_RESPONDENTS
from ..stats.random_effects import MAX_TAU

Confidence = Annotated[float, Field(ge=0.5, lt=1, description="Level of the intervals.")]


class RankingJobIn(StrictModel):
    """``GET …/ranking`` as a job (pairwise local surveys), with the same parameters."""

    kind: Literal["ranking"]
    method: Literal["debiased_mle", "naive_mle"] = "debiased_mle"
    lambda_: float | None = Field(None, alias="lambda", gt=0, le=1e9)
    k: int | None = Field(None, ge=1)
    confidence: Confidence = 0.95
    uncertainty: Literal["sandwich", "bootstrap", "none"] = "sandwich"
    covariance: Literal["cluster", "model"] = "cluster"
    replicates: int = Field(BOOTSTRAP_REPLICATES, ge=BOOTSTRAP_MIN_REPLICATES, le=BOOTSTRAP_MAX_REPLICATES)


class BootstrapJobIn(StrictModel):
    """The ranking with bootstrap intervals (``uncertainty=bootstrap``) as a job."""

    kind: Literal["bootstrap"]
    k: int | None = Field(None, ge=1)
    confidence: Confidence = 0.95
    covariance: Literal["cluster", "model"] = "cluster"
    replicates: int = Field(BOOTSTRAP_REPLICATES, ge=BOOTSTRAP_MIN_REPLICATES, le=BOOTSTRAP_MAX_REPLICATES)


class PlanJobIn(StrictModel):
    """``GET /v1/surveys/{sid}/plan`` as a job, with the same parameters."""

    kind: Literal["plan"]
    k: int = Field(ge=1, description="Size K of the top set to certify.")
    target: float = Field(0.8, gt=0, lt=1)
    respondents: int | None = Field(None, ge=0, le=1_000_000)
    max_respondents: int = Field(100_000, ge=1, le=1_000_000)
    confidence: Confidence = 0.95
    scores: list[float] | None = Field(None, min_length=1, max_length=100_000)
    tau: float | None = Field(None, ge=0, le=MAX_TAU)
    pairs_per_respondent: int | None = Field(None, ge=1)
    epsilon: float | None = Field(None, ge=0.001, le=20)
    replications: int = Field(100, ge=20, le=1000)
    seed: int = Field(0, ge=0)


class DesignJobIn(StrictModel):
    """``GET /v1/plan`` (the planner of a survey not yet run) as a job, with the same
    parameters (``epsilon`` and ``weights`` as lists)."""

    kind: Literal["design"]
    items: int = Field(ge=2, le=MAX_PLAN_ITEMS)
    pairs_per_respondent: int = Field(ge=1)
    k: int = Field(ge=1)
    respondents: int | None = Field(None, ge=1, le=MAX_PLAN_RESPONDENTS)
    epsilon: list[float] | None = Field(None, min_length=1, max_length=32)
    weights: list[float] | None = Field(None, min_length=1, max_length=32)
    spread: float = Field(2.0, gt=0, le=20)
    gap: float | None = Field(None, gt=0, le=20)
    replications: int = Field(200, ge=20, le=2000)
    seed: int = Field(0, ge=0)
    solve: Literal["none", "respondents", "epsilon"] = "none"
    target: float | None = Field(None, gt=0, lt=1)
    scores: list[float] | None = Field(None, min_length=2, max_length=MAX_PLAN_ITEMS)


JobIn = Annotated[RankingJobIn | BootstrapJobIn | PlanJobIn, Field(discriminator="kind")]


class JobOut(BaseModel):
    id: str
    survey_id: str | None = Field(description="The survey analysed; null for a design plan.")
    kind: Literal["ranking", "bootstrap", "plan", "design"]
    status: Literal["queued", "running", "done", "failed", "cancelled"]
    progress: float = Field(
        description="In [0, 1]: the units of work done (bootstrap replicates, simulated surveys) over "
        "those expected; 1 when done. An estimate where the number of units depends on the data."
    )
    parameters: dict[str, Any]
    result: dict[str, Any] | None = Field(
        None,
        description="When done: what the synchronous endpoint answers (RankingOut, SurveyPlanOut, PlanOut).",
    )
    error: str | None = Field(None, description="When failed: why.")
    attempts: int = Field(description="Runners that claimed it (a lost runner's job is retried once).")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class JobList(BaseModel):
    jobs: list[JobOut] = Field(description="The survey's latest jobs, newest first (results left out).")
