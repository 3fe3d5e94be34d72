"""The product's vocabulary in one place (SPEC §2).

Literal types are used by the event schemas (so the generated JSON Schema carries the enums), by the
database migrations (CHECK constraints, kept equal by a test) and by the domain code alike.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = [
    "CHANNELS",
    "CHANNEL_CREDIBILITY",
    "EPISTEMIC_KINDS",
    "MEMORY_KINDS",
    "MEMORY_STATUSES",
    "RELATIONS",
    "VERACITIES",
    "VERACITY_WEIGHT",
    "Access",
    "Channel",
    "EpistemicKind",
    "MemoryKind",
    "MemoryStatus",
    "Relation",
    "Veracity",
]

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

MemoryStatus = Literal["active", "retracted", "superseded", "archived"]
"""Lifecycle of a record; non-active records stay for provenance and leave normal recall."""

Access = Literal["none", "read", "write"]
"""What a role may do in a domain."""

EPISTEMIC_KINDS: Final[tuple[str, ...]] = get_args(EpistemicKind)
MEMORY_KINDS: Final[tuple[str, ...]] = get_args(MemoryKind)
RELATIONS: Final[tuple[str, ...]] = get_args(Relation)
CHANNELS: Final[tuple[str, ...]] = get_args(Channel)
VERACITIES: Final[tuple[str, ...]] = get_args(Veracity)
MEMORY_STATUSES: Final[tuple[str, ...]] = get_args(MemoryStatus)

# Trust order: operator > user ≈ system > tool > source > low (SPEC §2, defaults).
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
