"""Request and response bodies of the REST API (the OpenAPI contract), one module per domain;
every body is importable from here. Request bodies are defined in this package; response
bodies are the services' typed results (``app.services.results``), re-exported."""

from __future__ import annotations

from ...services.results.analysis import (
    ConsensusItem,
    ConsensusOut,
    Diagnostics,
    ImportOut,
    PairwiseItem,
    PairwiseOut,
    PrivacyRegime,
    RankedItem,
    RankingOut,
    UncertaintyInfo,
)
from ...services.results.federation import (
    RoundList,
    RoundOut,
    RoundSiteOut,
    SitePeer,
    SiteView,
)
from ...services.results.plan import (
    EstimateOut,
    PlanBody,
    PlanOut,
    SurveyPlanBody,
    SurveyPlanItem,
    SurveyPlanOut,
)
from ...services.results.releases import (
    Budget,
    ReleasedScore,
    ReleasedWins,
    ReleaseFields,
    ReleaseList,
    ReleaseOut,
    ReleaseResult,
    ReleaseSummary,
)
from ...services.results.respondents import (
    QuestionItem,
    QuestionOut,
)
from ...services.results.surveys import (
    CoverageItem,
    CoverageOut,
)
from .common import ErrorOut, Health, ItemId, Label, StrictModel, Text
from .federation import (
    ContributionIn,
    RoundCreate,
    SiteKeyIn,
    SiteName,
)
from .keys import KeyCreate, KeyCreated, KeyList, KeyOut, WhoAmI
from .releases import (
    ReleaseCreate,
)
from .respondents import (
    ComparisonIn,
    PairOut,
    PairsOut,
    RespondentCreate,
    RespondentCreated,
    RespondentStatus,
    ResponsesIn,
    ResponsesOut,
)
from .surveys import (
    ItemOut,
    ItemsAdd,
    PrivacyIn,
    PrivacyOut,
    PublicSurveyOut,
    SurveyCreate,
    SurveyFields,
    SurveyList,
    SurveyOut,
    SurveySummary,
    SurveyUpdate,
)

__all__ = [
    "Budget",
    "ComparisonIn",
    "ConsensusItem",
    "ConsensusOut",
    "ContributionIn",
    "CoverageItem",
    "CoverageOut",
    "Diagnostics",
    "ErrorOut",
    "EstimateOut",
    "Health",
    "ImportOut",
    "ItemId",
    "ItemOut",
    "ItemsAdd",
    "KeyCreate",
    "KeyCreated",
    "KeyList",
    "KeyOut",
    "Label",
    "PairOut",
    "PairsOut",
    "PairwiseItem",
    "PairwiseOut",
    "PlanBody",
    "PlanOut",
    "PrivacyIn",
    "PrivacyOut",
    "PrivacyRegime",
    "PublicSurveyOut",
    "QuestionItem",
    "QuestionOut",
    "RankedItem",
    "RankingOut",
    "ReleaseCreate",
    "ReleaseFields",
    "ReleaseList",
    "ReleaseOut",
    "ReleaseResult",
    "ReleaseSummary",
    "ReleasedScore",
    "ReleasedWins",
    "RespondentCreate",
    "RespondentCreated",
    "RespondentStatus",
    "ResponsesIn",
    "ResponsesOut",
    "RoundCreate",
    "RoundList",
    "RoundOut",
    "RoundSiteOut",
    "SiteKeyIn",
    "SiteName",
    "SitePeer",
    "SiteView",
    "StrictModel",
    "SurveyCreate",
    "SurveyFields",
    "SurveyList",
    "SurveyOut",
    "SurveyPlanBody",
    "SurveyPlanItem",
    "SurveyPlanOut",
    "SurveySummary",
    "SurveyUpdate",
    "Text",
    "UncertaintyInfo",
    "WhoAmI",
]
