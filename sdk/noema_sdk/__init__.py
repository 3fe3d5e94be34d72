"""Noema for agents on NATS: an async client for every agent operation and for publishing
observations, depending on ``nats-py`` and ``msgspec`` only.

    async with NoemaClient.connect(url, workspace="acme", agent="alice", role="engineer") as noema:
        fact = await noema.propose_fact("ops", "deploy-day", "Deploys happen on Tuesdays")
        hits = await noema.search_memory("when do we deploy?")
"""

from .client import NoemaClient
from .errors import (
    InvalidRequest,
    NoemaError,
    NotFound,
    PermissionDenied,
    RequestTimeout,
    ServerError,
    ServiceUnavailable,
)
from .models import (
    Conflict,
    ConflictDecision,
    ConsolidateReport,
    Corroboration,
    FactOutcome,
    HarmonizeReport,
    Merge,
    NotesUpdate,
    ObservationFields,
    ObservationReceipt,
    PolicyChange,
    PolicyOutcome,
    Preamble,
    Promotion,
    RecordedObservation,
    SearchHit,
    SearchResult,
    Why,
    WhyEvent,
    WhyStep,
)

__version__ = "0.1.0"

__all__ = [
    "Conflict",
    "ConflictDecision",
    "ConsolidateReport",
    "Corroboration",
    "FactOutcome",
    "HarmonizeReport",
    "InvalidRequest",
    "Merge",
    "NoemaClient",
    "NoemaError",
    "NotFound",
    "NotesUpdate",
    "ObservationFields",
    "ObservationReceipt",
    "PermissionDenied",
    "PolicyChange",
    "PolicyOutcome",
    "Preamble",
    "Promotion",
    "RecordedObservation",
    "RequestTimeout",
    "SearchHit",
    "SearchResult",
    "ServerError",
    "ServiceUnavailable",
    "Why",
    "WhyEvent",
    "WhyStep",
]
