"""The event catalog (requirements §9): every event Noema publishes, as frozen, tagged, versioned Structs.

Evolve additively: a new field gets a default. Anything else is a new version (a new class with a
``.v2`` tag) plus a pure upcaster in :mod:`noema_events.upcasting`; old events are never rewritten.

Events record decisions, not recipes: every value the projection applies (a recall's boost, the
half-life and floor of a decay, a mention's confidence rate and cap, a fact's credibility) is in the
event, set by the worker that decided it, so a replay reproduces the state that was held whatever
today's constants. A field added to record such a value gets as its default the value that was in
force before it was recorded — a literal, never the live constant — so older events read as they
were applied; a value that was derived from other fields needs a new version, whose upcaster derives
it with the values of that time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from .envelope import Event
from .vocabulary import Access, Channel, EpistemicKind, MemoryKind, MemoryType, Relation, Veracity

__all__ = [
    "EVENT_TYPES",
    "ActivationDecayed",
    "ActivationDecayedPayload",
    "AnyEvent",
    "AttentionDecided",
    "AttentionDecidedPayload",
    "AttentionDecision",
    "ConflictRecorded",
    "ConflictRecordedPayload",
    "ContentErased",
    "ContentErasedPayload",
    "DomainCreated",
    "DomainCreatedPayload",
    "FactMentioned",
    "FactMentionedPayload",
    "FactProposed",
    "FactProposedPayload",
    "GrantChanged",
    "GrantChangedPayload",
    "MemoryCreated",
    "MemoryCreatedPayload",
    "MemoryEmbedded",
    "MemoryEmbeddedPayload",
    "MemoryReinforced",
    "MemoryReinforcedPayload",
    "MemoryRetrieved",
    "MemoryRetrievedPayload",
    "MemorySuperseded",
    "MemorySupersededPayload",
    "NotesUpdated",
    "NotesUpdatedPayload",
    "ObservationPayload",
    "ObservationRecorded",
    "OperatorAction",
    "OperatorActionPayload",
    "PolicyProposed",
    "PolicyProposedPayload",
    "PolicySuperseded",
    "PolicySupersededPayload",
    "RecallProposed",
    "RecallProposedPayload",
    "RelationshipAdded",
    "RelationshipAddedPayload",
    "SessionHead",
    "WorkingMemoryItem",
    "WorkingMemoryUpdated",
    "WorkingMemoryUpdatedPayload",
    "WorkspaceConfigured",
    "WorkspaceConfiguredPayload",
]

Unit = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
Content = Annotated[str, msgspec.Meta(min_length=1, max_length=32_000, pattern=r"\S")]
"""Text that says something: not empty and not only whitespace (a blank observation is refused —
dead-lettered by attend — instead of becoming a memory nobody can search for)."""
RecordedContent = Annotated[str, msgspec.Meta(min_length=1, max_length=200_000)]
"""A memory's content as ``memory.created`` records it: like :data:`Content`, but whitespace-only text
is still read, because attend turned blank observations into memories before ``Content`` refused
them, and replay must decode every event ever recorded. Sealed content is longer than its text (see
:data:`SealedContent`)."""
Label = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
SUBJECT_KEY_PATTERN = r"^[A-Za-z0-9._:@/+=-]{1,200}$"
SubjectKey = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=SUBJECT_KEY_PATTERN)]
"""Who or what a piece of content is about, as its publisher tags it (e.g. ``person:4711``,
``customer:acme-7``): what ``noemactl erase --subject`` finds it by. Use an opaque id, not a name —
the key itself is kept in the erasure's audit record."""
Subjects = Annotated[list[SubjectKey], msgspec.Meta(max_length=32)]
SealedContent = Annotated[str, msgspec.Meta(min_length=1, max_length=200_000, pattern=r"\S")]
"""Content as an event records it: plain, or sealed under its item's data key (docs/privacy.md),
which makes it longer than the text it holds; the text's own limit is checked where it comes in."""
HalfLife = Annotated[float, msgspec.Meta(gt=0.0)]
"""A half-life in days."""
Boost = Annotated[float, msgspec.Meta(gt=0.0)]
"""A share of the distance to activation 1 that a reinforcement adds."""


class _Payload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=False, omit_defaults=True):
    """Base of event payloads: immutable, keyword-only, tolerant of fields added later."""


# --- observations -------------------------------------------------------------------------------


class ObservationPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """What an agent (or a person) saw or said, as published on the observation stream."""

    content: Content
    channel: Channel = "user"
    source: str | None = None
    participants: list[str] = msgspec.field(default_factory=list)
    epistemic_kind: EpistemicKind = "observation"
    salience: Unit | None = None
    """Publisher's hint of how much this stands out; the attend worker estimates it when absent."""
    importance: Unit | None = None
    memory_type: MemoryType | None = None
    session: str | None = None
    happened_at: datetime | None = None
    """When the observed thing happened, if not when it was published (e.g. an imported transcript)."""
    metadata: dict[str, str] = msgspec.field(default_factory=dict)
    subjects: Subjects = msgspec.field(default_factory=list)
    """Who or what this is about (:data:`SubjectKey`): erasing a subject erases what was observed
    about it and every memory, vector, recall and fact derived from that."""


class ObservationRecorded(Event, frozen=True, kw_only=True, tag="observation.recorded.v1"):
    """An observation; its ``id`` is the observation id and the ``Nats-Msg-Id``."""

    payload: ObservationPayload


# --- attention ----------------------------------------------------------------------------------


class AttentionDecision(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """One candidate's outcome in an attention cycle, with the features that decided it."""

    candidate_id: str
    candidate_kind: Literal["observation", "recall"] = "observation"
    memory_id: str | None = None
    admitted: bool
    score: float
    components: dict[str, float] = msgspec.field(default_factory=dict)
    reason: str = ""


class AttentionDecidedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """The outcome of one attention cycle: the candidates competed for a limited number of admissions."""

    decisions: list[AttentionDecision]
    threshold: float
    capacity: int
    through_seq: int | None = None
    """The highest observation-stream sequence the cycle covered. A cycle's events are stored all or
    none, so after a restart every candidate up to it is known to be decided (and is not decided
    again). Absent on events written before it existed."""


class AttentionDecided(Event, frozen=True, kw_only=True, tag="attention.decided.v1"):
    """The attend worker decided which candidates enter memory and working memory."""

    payload: AttentionDecidedPayload


# --- memories -----------------------------------------------------------------------------------


class MemoryCreatedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """A new long-term memory record (requirements §3)."""

    memory_id: str
    kind: MemoryKind
    epistemic_kind: EpistemicKind
    content: RecordedContent
    memory_type: MemoryType = "observation"
    domain: str | None = None
    topic: str | None = None
    repo: str | None = None
    confidence: Unit = 1.0
    importance: Unit = 0.5
    salience: Unit = 0.5
    credibility: Unit = 0.8
    veracity: Veracity | None = None
    channel: Channel = "user"
    source: str | None = None
    participants: list[str] = msgspec.field(default_factory=list)
    steps: list[str] = msgspec.field(default_factory=list)
    preconditions: list[str] = msgspec.field(default_factory=list)
    outcomes: list[str] = msgspec.field(default_factory=list)
    source_observation_ids: list[str] = msgspec.field(default_factory=list)
    subjects: Subjects = msgspec.field(default_factory=list)
    """The subjects of the observations it came from (erasure finds its key by them)."""
    happened_at: datetime | None = None
    valid_until: datetime | None = None
    session: str | None = None
    tier: Literal["long", "hot"] = "long"
    """``hot``: a session-scoped item written by ``remember``, which ``consolidate_memory`` may promote."""
    half_life_days: HalfLife = 14.0
    """The half-life the memory decays with until its first reinforcement (14 days before it was
    recorded)."""
    activation_floor: Unit = 1e-6


class MemoryCreated(Event, frozen=True, kw_only=True, tag="memory.created.v1"):
    """A memory record was created; the record's ``origin_event`` is this event's id."""

    payload: MemoryCreatedPayload


class MemoryEmbeddedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """A vector for a memory under one model; the event carries the vector so replay needs no model."""

    memory_id: str
    model: str
    dimensions: int
    vector: list[float] = msgspec.field(default_factory=list)
    sealed_vector: str | None = None
    """The vector sealed under its memory's data key (then ``vector`` is empty): a vector says
    enough about its text to be erased with it."""


class MemoryEmbedded(Event, frozen=True, kw_only=True, tag="memory.embedded.v1"):
    """A memory was embedded."""

    payload: MemoryEmbeddedPayload


class MemoryRetrievedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """An admitted recall, with the scoring components that made it win and the reinforcement it
    decided: the memory decays to the recall time with ``half_life_days`` (never below
    ``activation_floor``), then gains ``boost`` of what it lacks to activation 1."""

    memory_id: str
    query: str = ""
    score: float = 0.0
    components: dict[str, float] = msgspec.field(default_factory=dict)
    boost: Boost
    half_life_days: HalfLife
    activation_floor: Unit


class MemoryRetrieved(Event, frozen=True, kw_only=True, tag="memory.retrieved.v2"):
    """A memory was recalled and admitted; the projector reinforces it (activation, recall_count)
    with the values the event records. v1 did not record the half-life and floor, and a boost only
    when a publisher set one (the projector then used its own): its upcaster fills the values then
    in force."""

    payload: MemoryRetrievedPayload


class RecallProposedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """A memory the retrieve worker recalled for an observation, offered to attention as a candidate."""

    memory_id: str
    observation_id: str
    query: str = ""
    """The observation's text the memory was recalled for."""
    score: float = 0.0
    importance: Unit = 0.5
    credibility: Unit = 0.8
    components: dict[str, float] = msgspec.field(default_factory=dict)
    content: str = ""
    subjects: Subjects = msgspec.field(default_factory=list)
    """The subjects of the observation that asked (``query`` is its text)."""
    """The recalled memory's content (its beginning), which attention weighs and keeps as the gist;
    empty in proposals recorded before it was carried (attention then falls back to ``query``)."""


class RecallProposed(Event, frozen=True, kw_only=True, tag="recall.proposed.v1"):
    """A recall candidate; published on the observation stream so it competes with observations."""

    payload: RecallProposedPayload


class MemoryReinforcedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """An explicit reinforcement not caused by recall (e.g. an operator pinning a memory): like a
    recall's, with ``amount`` (bounded to [0, 1]) as the boost."""

    memory_id: str
    amount: float
    reason: str = ""
    half_life_days: HalfLife = 14.0
    """The half-life the memory decays with up to the reinforcement (14 days before it was recorded)."""
    activation_floor: Unit = 1e-6
    """The activation it never decays below (1e-6 before it was recorded)."""


class MemoryReinforced(Event, frozen=True, kw_only=True, tag="memory.reinforced.v1"):
    """A memory's activation was raised."""

    payload: MemoryReinforcedPayload


class ActivationDecayedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """One decay tick for a whole workspace. Activation is computed where it is read, in closed form
    from each memory's last reinforcement (docs/memory-model.md), so a tick rewrites no memory: it
    records which memories faded below ``fade_threshold`` and which passed their ``valid_until``
    between ``since`` and ``tick_at`` (at most ``LISTED`` of each; the totals count them all).

    ``rewrite``: the tick of an earlier release (``activation.decayed.v1``, read through its
    upcaster), which decayed every memory of the workspace to ``tick_at`` with ``half_life_days``
    and ``activation_floor``; the projector still applies those as recorded, so replay reproduces
    the read models they built."""

    tick_at: datetime
    half_life_days: HalfLife = 14.0
    activation_floor: Unit = 1e-6
    """The activation no memory decays below (1e-6 before it was recorded)."""
    rewrite: bool = False
    since: datetime | None = None
    """The previous tick (None: a tick of an earlier release)."""
    fade_threshold: Unit = 0.05
    faded: list[str] = msgspec.field(default_factory=list)
    """Active memories whose activation fell below ``fade_threshold`` in (since, tick_at]."""
    faded_total: int = 0
    expired: list[str] = msgspec.field(default_factory=list)
    """Active memories whose ``valid_until`` fell in (since, tick_at]."""
    expired_total: int = 0


class ActivationDecayed(Event, frozen=True, kw_only=True, tag="activation.decayed.v2"):
    """A workspace's decay tick: which memories faded or expired since the previous one (one event
    per workspace per tick, not one per memory). v1 ticks rewrote every memory's activation; their
    upcaster marks them ``rewrite``."""

    payload: ActivationDecayedPayload


class MemorySupersededPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """A memory was replaced by a newer version; the old record stays for provenance."""

    memory_id: str
    superseded_by: str
    reason: str = ""


class MemorySuperseded(Event, frozen=True, kw_only=True, tag="memory.superseded.v1"):
    """A memory was superseded."""

    payload: MemorySupersededPayload


class RelationshipAddedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """An edge between two memories of the same mind and workspace."""

    relationship_id: str
    from_id: str
    to_id: str
    relation: Relation
    confidence: Unit = 1.0
    source: str = ""


class RelationshipAdded(Event, frozen=True, kw_only=True, tag="relationship.added.v1"):
    """A relationship was added."""

    payload: RelationshipAddedPayload


# --- workspace knowledge ------------------------------------------------------------------------


class FactProposedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """A semantic fact was written to a domain/topic (``domain`` is the qualified key:
    ``architecture`` or ``repo:<slug>/architecture``); the fact's mind is the agent that holds it."""

    memory_id: str
    domain: Label
    topic: Label
    content: SealedContent
    epistemic_kind: EpistemicKind = "fact"
    veracity: Veracity = "stated"
    memory_type: MemoryType = "fact"
    role: str = ""
    repo: str | None = None
    confidence: Unit = 1.0
    valid_until: datetime | None = None
    source_observation_ids: list[str] = msgspec.field(default_factory=list)
    subjects: Subjects = msgspec.field(default_factory=list)
    supersedes: str | None = None
    """Set by ``supersede_fact``: the fact this one explicitly replaces."""
    credibility: Unit
    """The weight of its veracity, decided with it."""
    importance: Unit
    salience: Unit
    half_life_days: HalfLife = 14.0
    """The half-life the fact decays with until its first reinforcement (14 days before it was
    recorded)."""
    activation_floor: Unit = 1e-6


class FactProposed(Event, frozen=True, kw_only=True, tag="fact.proposed.v2"):
    """A fact was proposed (conflict detection runs against it). v1 did not record credibility,
    importance and salience (the projector derived them): its upcaster fills the values then in
    force."""

    payload: FactProposedPayload


class FactMentionedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """The same fact was mentioned again: confidence and mention_count rise instead of duplicating."""

    memory_id: str
    veracity: Veracity = "stated"
    source_observation_ids: list[str] = msgspec.field(default_factory=list)
    merged_from: list[str] = msgspec.field(default_factory=list)
    """Facts merged into this one (consolidate / harmonize); each is superseded by it."""
    reason: str = ""
    mentions: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 1
    """How many mentions this event stands for: a merge counts each merged fact."""
    rate: Unit
    """The share of the remaining doubt (1 − confidence) these mentions remove, decided from their
    veracity and number."""
    confidence_cap: Unit
    """The confidence the fact never rises above."""


class FactMentioned(Event, frozen=True, kw_only=True, tag="fact.mentioned.v2"):
    """An existing fact was mentioned again. v1 did not record the rate and cap (the projector
    derived them): its upcaster fills the values then in force."""

    payload: FactMentionedPayload


class ConflictRecordedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """Two records disagreed; the rule that decided the winner is kept."""

    conflict_id: str
    winner_id: str
    loser_id: str
    domain: str | None = None
    topic: str | None = None
    rule: str
    detail: str = ""


class ConflictRecorded(Event, frozen=True, kw_only=True, tag="conflict.recorded.v1"):
    """A conflict was recorded."""

    payload: ConflictRecordedPayload


class PolicyProposedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """A normative rule scoped to a workspace and domain."""

    policy_id: str
    domain: Label
    rule: Content
    repo: str | None = None
    required_role: str | None = None
    source_fact_ids: list[str] = msgspec.field(default_factory=list)


class PolicyProposed(Event, frozen=True, kw_only=True, tag="policy.proposed.v1"):
    """A policy was proposed (and is active)."""

    payload: PolicyProposedPayload


class PolicySupersededPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """A policy was replaced (or deactivated when ``superseded_by`` is empty)."""

    policy_id: str
    superseded_by: str | None = None
    reason: str = ""


class PolicySuperseded(Event, frozen=True, kw_only=True, tag="policy.superseded.v1"):
    """A policy was superseded."""

    payload: PolicySupersededPayload


class DomainCreatedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """A domain came into being on first use; ``repo`` set means repository scope."""

    domain: Label
    repo: str | None = None


class DomainCreated(Event, frozen=True, kw_only=True, tag="domain.created.v1"):
    """A domain was created."""

    payload: DomainCreatedPayload


class GrantChangedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """(role, domain) → access."""

    role: Label
    domain: Label
    repo: str | None = None
    access: Access
    previous: Access | None = None
    seeded: bool = False
    """The grant a new domain seeds in compatible mode (every role may write); strict mode ignores it."""


class GrantChanged(Event, frozen=True, kw_only=True, tag="grant.changed.v1"):
    """An access grant changed."""

    payload: GrantChangedPayload


class WorkspaceConfiguredPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """A workspace's settings: the access mode (compatible by default, or strict)."""

    access_mode: Literal["compatible", "strict"]


class WorkspaceConfigured(Event, frozen=True, kw_only=True, tag="workspace.configured.v1"):
    """A workspace's access mode changed."""

    payload: WorkspaceConfiguredPayload


class WorkingMemoryItem(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """One item a mind is actively holding."""

    memory_id: str
    weight: float
    entered_at: datetime
    gist: str = ""
    """The start of the item's content, for attention's context-relevance feature."""


class SessionHead(_Payload, frozen=True, kw_only=True):
    """The latest memory of one of a mind's sessions, so that its next episode follows it."""

    session: str
    """The session's digest (:func:`noema.domain.knowledge.session_digest`), not its name."""
    memory_id: str


class WorkingMemoryUpdatedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """The full new content of a mind's working memory (small, so the state is carried whole)."""

    items: list[WorkingMemoryItem]
    capacity: int = 9
    sessions: list[SessionHead] = msgspec.field(default_factory=list)
    """The latest memory of each of the mind's most recently continued sessions, oldest first (at
    most 64). Whoever decides the mind's next cycle (a restarted or another attend instance) takes
    its episode chains up from here. Absent in events recorded before it existed."""


class WorkingMemoryUpdated(Event, frozen=True, kw_only=True, tag="working_memory.updated.v1"):
    """A mind's working memory changed."""

    payload: WorkingMemoryUpdatedPayload


class NotesUpdatedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """An agent's private scratchpad, carried whole."""

    agent: Label
    notes: Annotated[str, msgspec.Meta(max_length=200_000)]
    """At most 32,000 characters of text, checked where notes are written; sealed under a key of this
    version's own (docs/privacy.md), which makes the recorded form longer."""


class NotesUpdated(Event, frozen=True, kw_only=True, tag="notes.updated.v1"):
    """An agent's notes changed."""

    payload: NotesUpdatedPayload


class OperatorActionPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """An operator changed the memory (retract, correct, create, archive, grant change, restore) or
    handled a dead letter (``dlq_retry``: re-published its original; ``dlq_drop``: deleted it), the
    dead letter then named by ``target_id`` ``<stream>:<seq>`` and described in ``details``."""

    action: Literal[
        "retract", "correct", "create", "archive", "grant_change", "restore", "dlq_retry", "dlq_drop"
    ]
    target_id: str | None = None
    reason: Annotated[str, msgspec.Meta(min_length=1, max_length=2_000)]
    details: dict[str, str] = msgspec.field(default_factory=dict)


class OperatorAction(Event, frozen=True, kw_only=True, tag="operator.action.v1"):
    """An operator acted; ``actor`` names them. Retract/archive change the target's status."""

    payload: OperatorActionPayload


class ContentErasedPayload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """An operator erased content for good (docs/privacy.md): the data keys of ``key_ids`` are
    destroyed, so every sealed field under them reads as erased; the read model blanks the content of
    ``memory_ids``. The record of the erasure — who (``actor``), when, why, what it covered — stays;
    the content does not."""

    erasure_id: str
    scope: Literal["subject", "memory", "observation", "notes"]
    target: Label
    """The subject key, the memory's or observation's id, or (``notes``) the agent's name."""
    reason: Annotated[str, msgspec.Meta(min_length=1, max_length=2_000)]
    key_ids: list[str] = msgspec.field(default_factory=list)
    memory_ids: list[str] = msgspec.field(default_factory=list)
    observation_ids: list[str] = msgspec.field(default_factory=list)
    """Observations deleted from the observation stream (their messages overwritten)."""
    dead_letters: list[str] = msgspec.field(default_factory=list)
    """Dead letters deleted, as ``<stream>:<seq>``."""
    observation_seqs: list[int] = msgspec.field(default_factory=list)
    """Where the erased observations are stored on the observation stream, when the process that
    recorded the erasure left deleting them to the projector (its NATS identity may not): the
    projector, applying the erasure, deletes each message there that is one of them."""


class ContentErased(Event, frozen=True, kw_only=True, tag="content.erased.v1"):
    """Content erased by an operator; ``actor`` names them."""

    payload: ContentErasedPayload


AnyEvent = (
    ObservationRecorded
    | AttentionDecided
    | MemoryCreated
    | MemoryEmbedded
    | MemoryRetrieved
    | RecallProposed
    | MemoryReinforced
    | ActivationDecayed
    | MemorySuperseded
    | RelationshipAdded
    | FactProposed
    | FactMentioned
    | ConflictRecorded
    | PolicyProposed
    | PolicySuperseded
    | DomainCreated
    | GrantChanged
    | WorkspaceConfigured
    | WorkingMemoryUpdated
    | NotesUpdated
    | OperatorAction
    | ContentErased
)
"""Every current event version; decode with :func:`noema_events.codec.decode_event`."""

EVENT_TYPES: dict[str, type[Event]] = {str(cls.__struct_config__.tag): cls for cls in AnyEvent.__args__}
"""Tag → class for every current event version."""
