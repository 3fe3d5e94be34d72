"""The vocabulary of Noema (SPEC §2), re-exported for the core library.

The definitions live in :mod:`noema_events.vocabulary` so that the event schemas, the database
constraints (kept equal by a test) and the code share one source.
"""

from noema_events.vocabulary import (
    CHANNEL_CREDIBILITY,
    CHANNELS,
    EPISTEMIC_KINDS,
    MEMORY_KINDS,
    MEMORY_STATUSES,
    MEMORY_TYPE_NAMES,
    MEMORY_TYPES,
    RELATIONS,
    VERACITIES,
    VERACITY_WEIGHT,
    Access,
    Channel,
    EpistemicKind,
    MemoryKind,
    MemoryStatus,
    MemoryType,
    MemoryTypeSpec,
    Relation,
    Veracity,
)

__all__ = [
    "CHANNELS",
    "CHANNEL_CREDIBILITY",
    "EPISTEMIC_KINDS",
    "MEMORY_KINDS",
    "MEMORY_STATUSES",
    "MEMORY_TYPES",
    "MEMORY_TYPE_NAMES",
    "RELATIONS",
    "VERACITIES",
    "VERACITY_WEIGHT",
    "Access",
    "Channel",
    "EpistemicKind",
    "MemoryKind",
    "MemoryStatus",
    "MemoryType",
    "MemoryTypeSpec",
    "Relation",
    "Veracity",
]
