"""The product's vocabulary in one place (requirements §2).

Literal types are used by the event schemas (so the generated JSON Schema carries the enums), by the
database migrations (CHECK constraints, kept equal by a test) and by the domain code alike.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple, get_args

__all__ = [
    "CHANNELS",
    "CHANNEL_CREDIBILITY",
    "EPISTEMIC_KINDS",
    "MEMORY_KINDS",
    "MEMORY_STATUSES",
    "MEMORY_TYPES",
    "MEMORY_TYPE_NAMES",
    "NAME_PATTERN",
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

NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
"""Workspaces and minds are NATS subject tokens, so they are restricted to a safe alphabet (the
envelope's :data:`noema_events.envelope.Name`)."""

EpistemicKind = Literal[
    "observation",
    "fact",
    "memory",
    "claim",
    "hypothesis",
    "belief",
    "prediction",
    "assumption",
    "inference",
    "opinion",
]
"""What a record is, epistemically: the system never confuses what it saw with what it inferred."""

MemoryKind = Literal["episodic", "semantic", "procedural", "autobiographical"]
"""Which long-term memory system a record belongs to."""

Relation = Literal[
    "related_to",
    "supports",
    "contradicts",
    "derived_from",
    "supersedes",
    "part_of",
    "caused_by",
    "episodic_next",
]
"""Names of the edges between memories."""

Channel = Literal["operator", "user", "system", "tool", "source", "low"]
"""Where a record came from; the channel's trust sets the record's credibility."""

Veracity = Literal["stated", "inferred", "tool", "imported"]
"""How a fact came to be known: stated by a human, inferred by an agent, produced by a tool, imported."""

MemoryStatus = Literal["active", "retracted", "superseded", "archived", "erased"]
"""Lifecycle of a record; non-active records stay for provenance and leave normal recall."""

Access = Literal["none", "read", "write"]
"""What a role may do in a domain."""

MemoryType = Literal[
    "profile",
    "convention",
    "fact",
    "decision",
    "preference",
    "insight",
    "observation",
    "event",
    "task",
    "request",
    "commitment",
]
"""Decay class of a memory; its Weibull parameters are in :data:`MEMORY_TYPES`."""

EPISTEMIC_KINDS: Final[tuple[str, ...]] = get_args(EpistemicKind)
MEMORY_KINDS: Final[tuple[str, ...]] = get_args(MemoryKind)
RELATIONS: Final[tuple[str, ...]] = get_args(Relation)
CHANNELS: Final[tuple[str, ...]] = get_args(Channel)
VERACITIES: Final[tuple[str, ...]] = get_args(Veracity)
MEMORY_STATUSES: Final[tuple[str, ...]] = get_args(MemoryStatus)

# Trust order: operator > user ≈ system > tool > source > low (requirements §2, defaults).
CHANNEL_CREDIBILITY: Final[dict[str, float]] = {
    "operator": 1.0,
    "user": 0.8,
    "system": 0.8,
    "tool": 0.6,
    "source": 0.5,
    "low": 0.2,
}

# The weight seeds a fact's starting confidence and sizes every confidence bump on re-mention.
VERACITY_WEIGHT: Final[dict[str, float]] = {
    "stated": 1.0,
    "inferred": 0.7,
    "tool": 0.5,
    "imported": 0.6,
}


class MemoryTypeSpec(NamedTuple):
    """Decay class of a memory: Weibull survival ``S(t) = exp(-(t/scale)^shape)``, t in days.

    ``scale=None`` means the type does not fade (S = 1 at every age).
    """

    shape: float
    scale_days: float | None
    why: str


# Ordered from the most durable to the fastest fading at a 30-day age (a test keeps it so).
MEMORY_TYPES: Final[dict[str, MemoryTypeSpec]] = {
    "profile": MemoryTypeSpec(1.0, None, "who someone is: stable until corrected, never fades"),
    "convention": MemoryTypeSpec(0.9, 730.0, "team conventions change rarely; slow, early-flattening fade"),
    "fact": MemoryTypeSpec(0.9, 365.0, "general facts stay useful for about a year"),
    "decision": MemoryTypeSpec(1.0, 240.0, "decisions hold until revisited; steady fade over months"),
    "preference": MemoryTypeSpec(0.8, 365.0, "preferences drift over months"),
    "insight": MemoryTypeSpec(0.8, 120.0, "lessons learned lose specificity over a season"),
    "observation": MemoryTypeSpec(1.0, 60.0, "raw observations matter for weeks"),
    "event": MemoryTypeSpec(1.2, 45.0, "things that happened matter less once they are past"),
    "task": MemoryTypeSpec(1.5, 21.0, "tasks are done or dropped within weeks"),
    "request": MemoryTypeSpec(1.5, 14.0, "requests are answered or stale within two weeks"),
    "commitment": MemoryTypeSpec(
        2.0, 10.0, "a commitment with a deadline fades fast once the deadline passes"
    ),
}
"""Memory types (decay classes) and their Weibull parameters; see docs/memory-model.md."""

MEMORY_TYPE_NAMES: Final[tuple[str, ...]] = get_args(MemoryType)
