"""Noema for agents on NATS: an async client for every agent operation and for publishing
observations, depending on ``nats-py`` and ``msgspec`` only.

    async with NoemaClient.connect(url, workspace="acme", agent="alice", role="engineer") as noema:
        fact = await noema.propose_fact("ops", "deploy-day", "Deploys happen on Tuesdays")
        hits = await noema.search_memory("when do we deploy?")
"""

from typing import TYPE_CHECKING, Any

from .errors import (
    InvalidRequest,
    NoemaError,
    NotFound,
    PermissionDenied,
    RateLimited,
    RequestTimeout,
    ServerError,
    ServiceUnavailable,
)
from .models import (
    AsOf,
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

if TYPE_CHECKING:
    from .client import NoemaClient

__version__ = "0.1.0"

__all__ = [
    "AsOf",
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
    "RateLimited",
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


def __getattr__(name: str) -> Any:
    """``NoemaClient`` is imported on first use: it brings nats-py, which a program that only
    builds observations or reads the models (``noemactl --help``) need not load."""
    if name == "NoemaClient":
        from .client import NoemaClient

        return NoemaClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
