"""Noema for agents on NATS: an async client for every agent operation and for publishing
observations, depending on ``nats-py`` and ``msgspec`` only.

    async with NoemaClient.connect(url, workspace="acme", agent="alice", role="engineer") as noema:
        fact = await noema.propose_fact("ops", "deploy-day", "Deploys happen on Tuesdays")
        hits = await noema.search_memory("when do we deploy?")
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what each name is, for the type checker (re-exported: `X as X`)
    from .client import NoemaClient as NoemaClient
    from .errors import InvalidRequest as InvalidRequest
    from .errors import NoemaError as NoemaError
    from .errors import NotFound as NotFound
    from .errors import PermissionDenied as PermissionDenied
    from .errors import RateLimited as RateLimited
    from .errors import RequestTimeout as RequestTimeout
    from .errors import ServerError as ServerError
    from .errors import ServiceUnavailable as ServiceUnavailable
    from .models import AsOf as AsOf
    from .models import Conflict as Conflict
    from .models import ConflictDecision as ConflictDecision
    from .models import ConsolidateReport as ConsolidateReport
    from .models import Corroboration as Corroboration
    from .models import FactOutcome as FactOutcome
    from .models import HarmonizeReport as HarmonizeReport
    from .models import Merge as Merge
    from .models import NotesUpdate as NotesUpdate
    from .models import ObservationFields as ObservationFields
    from .models import ObservationReceipt as ObservationReceipt
    from .models import PolicyChange as PolicyChange
    from .models import PolicyOutcome as PolicyOutcome
    from .models import Preamble as Preamble
    from .models import Promotion as Promotion
    from .models import RecordedObservation as RecordedObservation
    from .models import SearchHit as SearchHit
    from .models import SearchResult as SearchResult
    from .models import Why as Why
    from .models import WhyEvent as WhyEvent
    from .models import WhyStep as WhyStep

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


_HOMES = {
    "NoemaClient": "client",
    **dict.fromkeys(
        (
            "InvalidRequest",
            "NoemaError",
            "NotFound",
            "PermissionDenied",
            "RateLimited",
            "RequestTimeout",
            "ServerError",
            "ServiceUnavailable",
        ),
        "errors",
    ),
}
"""The module of each name that is not a model's (every other public name is one)."""


def __getattr__(name: str) -> Any:
    """A public name, from its module, loaded on first use (then kept here): ``NoemaClient`` brings
    nats-py, the models msgspec, which a program that only builds observations, or only shows
    their limit (:data:`noema_sdk.limits.MAX_CONTENT`, ``noemactl --help``), need not load."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOMES.get(name, 'models')}", __name__), name)
    globals()[name] = value
    return value
