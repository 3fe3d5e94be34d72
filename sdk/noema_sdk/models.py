"""Typed results of the agent operations: the one description of what each agent operation
returns. The SDK decodes the service's replies into them; the server derives from them the bus
contract's reply schemas (``schemas/asyncapi.json``) and the MCP tools' ``outputSchema``, so the
field descriptions below are what agents read.

Unknown fields are ignored, so an older SDK keeps working against a newer service.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, TypedDict

import msgspec
from msgspec import Meta

__all__ = [
    "AsOf",
    "Channel",
    "Conflict",
    "ConflictDecision",
    "ConflictList",
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

    seq: Annotated[int, Meta(description="The event-stream sequence the answer reflects.")]
    time: Annotated[datetime, Meta(description="The time of that event (RFC 3339).")]


_AS_OF = Meta(description="Present when as_of was given: the point answered for.")


class SearchHit(_Result, frozen=True, kw_only=True):
    """One recalled memory; ``components`` (each score voice) only with ``explain=True``."""

    id: Annotated[str, Meta(description="The memory's id (for why, supersede_fact, …).")]
    content: Annotated[str, Meta(description="What the memory says.")]
    score: Annotated[float, Meta(description="Its fused score; results come best first.")]
    kind: Annotated[str | None, Meta(description="episodic, semantic, procedural or autobiographical.")] = (
        None
    )
    epistemic_kind: Annotated[str | None, Meta(description="How sure: observation, fact, belief, …")] = None
    domain: Annotated[str | None, Meta(description="Its domain, if any.")] = None
    topic: Annotated[str | None, Meta(description="Its topic in the domain, if any.")] = None
    mind: Annotated[str | None, Meta(description="The mind (agent) it belongs to.")] = None
    when: Annotated[
        datetime | None, Meta(description="When it happened (else when it was recorded), RFC 3339.")
    ] = None
    confidence: Annotated[float | None, Meta(description="How confident the memory is, 0..1.")] = None
    components: Annotated[
        dict[str, float] | None, Meta(description="With explain: every component of the score.")
    ] = None


class SearchResult(_Result, frozen=True, kw_only=True):
    """What ``search_memory`` found, best first; ``intent`` and ``weights`` only with ``explain``."""

    query: Annotated[str, Meta(description="The query as searched.")]
    mode: Annotated[str, Meta(description="The mode that ranked the results.")]
    results: Annotated[list[SearchHit], Meta(description="The memories recalled, best first.")]
    intent: Annotated[str | None, Meta(description="With explain: how the query was read.")] = None
    weights: Annotated[
        dict[str, float] | None, Meta(description="With explain: each voice's weight in the fusion.")
    ] = None
    as_of: Annotated[AsOf | None, _AS_OF] = None


class FactOutcome(_Result, frozen=True, kw_only=True):
    """What a fact write did: ``proposed`` (new), ``mentioned`` (an equivalent one got stronger) or
    ``remembered`` (kept in the hot tier)."""

    outcome: Annotated[
        str,
        Meta(description="proposed (a new fact), mentioned (an equivalent one was repeated), remembered, …"),
    ]
    memory_id: Annotated[str, Meta(description="The fact's (or hot-tier item's) memory id.")]
    domain: Annotated[str, Meta(description="The domain it was recorded in.")]
    topic: Annotated[str, Meta(description="Its topic.")]


class PolicyOutcome(_Result, frozen=True, kw_only=True):
    """The id of a proposed policy."""

    policy_id: Annotated[str, Meta(description="The new policy's id.")]


class PolicyChange(_Result, frozen=True, kw_only=True):
    """A superseded policy and its replacement (None when it was deactivated)."""

    policy_id: Annotated[str | None, Meta(description="The replacing policy's id (null: deactivated).")]
    superseded: Annotated[str, Meta(description="The id of the policy replaced.")]
    deactivated: Annotated[bool, Meta(description="True when no rule was given: the policy just ends.")]


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

    promoted: Annotated[list[Promotion], Meta(description="Hot-tier items promoted to facts.")] = []
    merged: Annotated[list[Merge], Meta(description="Near-duplicate facts merged into one.")] = []
    archived: Annotated[list[str], Meta(description="Ids of the stale hot-tier items archived.")] = []
    skipped: Annotated[
        list[dict[str, str]],
        Meta(description="Items worth promoting into a domain your role may not write (strict mode)."),
    ] = []


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

    corroborated: Annotated[
        list[Corroboration], Meta(description="Agreeing facts made one (confidence raised).")
    ] = []
    conflicts: Annotated[
        list[ConflictDecision], Meta(description="Contradictions decided and recorded.")
    ] = []


class Conflict(_Result, frozen=True, kw_only=True):
    """A recorded conflict with both sides and the rule that decided it."""

    id: str
    domain: str | None
    """None when the conflict was recorded without one (the event allows it)."""
    topic: str | None
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


class ConflictList(_Result, frozen=True, kw_only=True):
    """What ``list_memory_conflicts`` found."""

    conflicts: Annotated[
        list[Conflict],
        Meta(
            description="Recorded conflicts, newest first: both sides (winner_id, loser_id, …) and the rule."
        ),
    ]
    as_of: Annotated[AsOf | None, _AS_OF] = None


class RecordedObservation(_Result, frozen=True, kw_only=True):
    """What ``record_observation`` appended to your private notes: the timestamped line."""

    agent: Annotated[str, Meta(description="Whose notes got the line (yours).")]
    line: Annotated[str, Meta(description="The line appended, with its timestamp.")]


class NotesUpdate(_Result, frozen=True, kw_only=True):
    """Whose notes were replaced, and their new length."""

    agent: Annotated[str, Meta(description="Whose notes were replaced (yours).")]
    characters: Annotated[int, Meta(description="The length of the notes now kept.")]


class Preamble(_Result, frozen=True, kw_only=True):
    """The dispatch preamble and what went into it."""

    text: Annotated[str, Meta(description="The preamble to read before the task (Markdown).")]
    policies: Annotated[list[str], Meta(description="The active policies it carries.")] = []
    notes: Annotated[str | None, Meta(description="Your private notes, if any.")] = None
    facts: Annotated[list[str], Meta(description="Up to five facts matching the task.")] = []
    as_of: Annotated[AsOf | None, _AS_OF] = None


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
    as_of: Annotated[AsOf | None, _AS_OF] = None


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
