"""What the memory explorer draws from besides the reads every client uses: the vocabulary (so the
page never hard-codes a list the event catalog owns) and a memory's graph neighbourhood in one answer."""

from __future__ import annotations

from typing import get_args, get_type_hints

import msgspec

from noema.adapters.postgres.graph import neighbourhood as walk
from noema.application.search import MODES
from noema_events.vocabulary import (
    CHANNEL_CREDIBILITY,
    EPISTEMIC_KINDS,
    MEMORY_KINDS,
    MEMORY_STATUSES,
    MEMORY_TYPES,
    RELATIONS,
    VERACITIES,
    Access,
)

from ..endpoint import Endpoint, Req, scoped_memory_id
from ..explorer_models import Channel, MemoryTypeInfo, Neighbourhood, Vocabulary
from ..knowledge_models import AccessModeBody

__all__ = ["ENDPOINTS", "VOCABULARY"]

VOCABULARY = Vocabulary(
    memory_kinds=list(MEMORY_KINDS),
    epistemic_kinds=list(EPISTEMIC_KINDS),
    memory_statuses=list(MEMORY_STATUSES),
    memory_types=[
        MemoryTypeInfo(name=name, shape=spec.shape, scale_days=spec.scale_days, why=spec.why)
        for name, spec in MEMORY_TYPES.items()
    ],
    relations=list(RELATIONS),
    channels=[Channel(name=name, credibility=c) for name, c in CHANNEL_CREDIBILITY.items()],
    veracities=list(VERACITIES),
    access_levels=list(get_args(Access)),
    access_modes=list(get_args(get_type_hints(AccessModeBody)["mode"])),
    search_modes=list(MODES),
)
"""Built once from the catalog (:mod:`noema_events.vocabulary`) and the API's own inputs."""


async def vocabulary(req: Req[None, None]) -> Vocabulary:
    """The closed lists: kinds, statuses, memory types, relations, channels, veracities, access."""
    return VOCABULARY


async def neighbourhood(req: Req[None, None]) -> Neighbourhood:
    """Two hops of relationship edges around a memory (by id or unique prefix)."""
    # One walk in the read model instead of a detail request per node.
    found = await walk(req.api.pool, await scoped_memory_id(req))
    return msgspec.convert(found, Neighbourhood)


ENDPOINTS = (
    Endpoint(
        "GET",
        "/v1/vocabulary",
        vocabulary,
        "The closed lists records and inputs use (kinds, statuses, memory types, relations, …)",
        Vocabulary,
        "system",
        public=True,
        description="From the event catalog's single source; the explorer builds its menus from it. "
        "No data: it needs no token.",
    ),
    Endpoint(
        "GET",
        "/v1/memories/{memory_id}/neighbourhood",
        neighbourhood,
        "A memory's two-hop neighbourhood in the relationship graph (nodes and edges)",
        Neighbourhood,
        "memories",
        errors=(400, 404),
        description="The memories within two relationship hops (at most 40, nearer hops first) and the "
        "edges between them, each node with its hop count; `truncated` says the limit left some out.",
    ),
)
