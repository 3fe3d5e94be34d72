"""Typed results of the agent operations (decoded from the service's replies).

Unknown fields are ignored, so an older SDK keeps working against a newer service.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypedDict

import msgspec

__all__ = [
    "AsOf",
    "Channel",
    "Conflict",
    "ConflictDecision",
    "ConsolidateReport",
    "Corroboration",
    "EpistemicKind",
    "FactOutcome",
    "HarmonizeReport",
    "MemoryType",
    "Merge",
    "NotesUpdate",
    "ObservationFields",
    "ObservationReceipt",
    "PolicyChange",
    "PolicyOutcome",
    "Preamble",
    "Promotion",
    "RecordedObservation",
    "SearchHit",
    "SearchResult",
    "Why",
    "WhyEvent",
    "WhyStep",
]


Channel = Literal["operator", "user", "system", "tool", "source", "low"]
"""Where an observation came from; its trust sets the record's credibility."""
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
"""What a record is, epistemically."""
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
"""Decay class of a memory."""


class _Result(msgspec.Struct, frozen=True, kw_only=True):
    """Base of results."""


class AsOf(_Result, frozen=True, kw_only=True):
    """The past point an answer given ``as_of`` reflects: the state after event-stream sequence
    ``seq``, read with ``time`` as now."""

    seq: int
    time: datetime


class SearchHit(_Result, frozen=True, kw_only=True):
    """One recalled memory; ``components`` (each score voice) only with ``explain=True``."""

    id: str
    content: str
    score: float
    kind: str | None = None
    epistemic_kind: str | None = None
    domain: str | None = None
    topic: str | None = None
    mind: str | None = None
    when: datetime | None = None
    confidence: float | None = None
    components: dict[str, float] | None = None


class SearchResult(_Result, frozen=True, kw_only=True):
    """What ``search_memory`` found, best first; ``intent`` and ``weights`` only with ``explain``."""

    query: str
    mode: str
    results: list[SearchHit]
    intent: str | None = None
    weights: dict[str, float] | None = None
    as_of: AsOf | None = None
    """With ``as_of``: the point the answer reflects."""


class FactOutcome(_Result, frozen=True, kw_only=True):
    """What a fact write did: ``proposed`` (new), ``mentioned`` (an equivalent one got stronger) or
    ``remembered`` (kept in the hot tier)."""

    outcome: str
    memory_id: str
    domain: str
    topic: str


class PolicyOutcome(_Result, frozen=True, kw_only=True):
    """The id of a proposed policy."""

    policy_id: str


class PolicyChange(_Result, frozen=True, kw_only=True):
    """A superseded policy and its replacement (None when it was deactivated)."""

    policy_id: str | None
    superseded: str
    deactivated: bool


class Promotion(_Result, frozen=True, kw_only=True):
    """Hot-tier items promoted to a fact by consolidation."""

    hot_id: str
    hot_ids: list[str]
    fact_id: str
    outcome: str


class Merge(_Result, frozen=True, kw_only=True):
    """Near-duplicate facts merged into ``kept`` (provenance kept)."""

    kept: str
    merged: list[str]


class ConsolidateReport(_Result, frozen=True, kw_only=True):
    """What ``consolidate_memory`` changed."""

    promoted: list[Promotion] = []
    merged: list[Merge] = []
    archived: list[str] = []
    skipped: list[dict[str, str]] = []
    """Items worth promoting into a domain the caller's role may not write (strict mode)."""


class Corroboration(_Result, frozen=True, kw_only=True):
    """Agreeing facts of different agents made one (confidence raised)."""

    kept: str
    merged: list[str]
    agents: list[str]


class ConflictDecision(_Result, frozen=True, kw_only=True):
    """A contradiction decided by harmonization."""

    winner: str
    loser: str
    rule: str


class HarmonizeReport(_Result, frozen=True, kw_only=True):
    """What ``harmonize_memory`` changed."""

    corroborated: list[Corroboration] = []
    conflicts: list[ConflictDecision] = []


class Conflict(_Result, frozen=True, kw_only=True):
    """A recorded conflict with both sides and the rule that decided it."""

    id: str
    domain: str
    topic: str
    rule: str
    detail: str = ""
    decided_by: str
    created_at: datetime
    winner_id: str
    winner_content: str | None = None
    winner_agent: str | None = None
    loser_id: str
    loser_content: str | None = None
    loser_agent: str | None = None


class RecordedObservation(_Result, frozen=True, kw_only=True):
    """What ``record_observation`` appended to your private notes: the timestamped line."""

    agent: str
    line: str


class NotesUpdate(_Result, frozen=True, kw_only=True):
    """Whose notes were replaced, and their new length."""

    agent: str
    characters: int


class Preamble(_Result, frozen=True, kw_only=True):
    """The dispatch preamble and what went into it."""

    text: str
    policies: list[str] = []
    notes: str | None = None
    facts: list[str] = []
    as_of: AsOf | None = None
    """With ``as_of``: the point the answer reflects."""


class WhyEvent(_Result, frozen=True, kw_only=True):
    """An event of a ``why`` answer, as the audit copy of the stream keeps it."""

    seq: int
    id: str
    type: str
    workspace: str
    mind: str
    occurred_at: datetime
    causation_id: str | None = None
    correlation_id: str
    actor: str
    subject: str
    payload: dict[str, Any] = {}
    """Every decision and score the event records (e.g. a conflict's ``rule``)."""


class WhyStep(_Result, frozen=True, kw_only=True):
    """One step of an id's history: an event, or a cause that is no event (``observation``,
    ``recall`` with attention's decision about it; ``cause``: an id nothing you may read explains)."""

    id: str
    kind: Literal["event", "observation", "recall", "cause"]
    parent: str | None = None
    """The step it follows from (None: a first cause): the steps form a tree."""
    link: Literal["causation", "correlation"] | None = None
    event: WhyEvent | None = None
    decision: dict[str, Any] | None = None


class Why(_Result, frozen=True, kw_only=True):
    """Why an id is what it is: the events naming it, their causes and effects, in stream order."""

    id: str
    subject: Literal["event", "memory", "fact", "policy", "observation", "recall", "reference"]
    workspace: str
    steps: list[WhyStep] = []
    truncated: bool = False
    as_of: AsOf | None = None
    """With ``as_of``: the point the answer reflects (the events stored by then)."""


class ObservationReceipt(_Result, frozen=True, kw_only=True):
    """A stored observation: its id and stream sequence (a retried publish returns the same), and
    whether the id was already stored (a retry within the duplicate window: not stored again; a
    service older than this field always reports false)."""

    observation_id: str
    seq: int
    duplicate: bool = False


class ObservationFields(TypedDict, total=False):
    """Optional fields of an observation (``observation.recorded.v1``); see docs/sdk.md."""

    observation_id: str
    """Stable id: publishing again with the same id stores it once (``Nats-Msg-Id``)."""
    correlation_id: str
    channel: Channel
    source: str
    participants: list[str]
    epistemic_kind: EpistemicKind
    salience: float
    importance: float
    memory_type: MemoryType
    session: str
    happened_at: datetime
    metadata: dict[str, str]
