"""Earlier event versions, frozen as they were published, and the pure upcasters that read each as the
next version (requirements §9).

An event of an earlier version is decoded as that version first, so it is refused exactly when the
code of its time refused it and its payload re-encodes exactly as that code stored it (the audit
copy keeps it as recorded); then the upcasters carry it to the current version. Each upcaster fills
what the later version records with the values in force when the earlier one was written, spelt out
here as literals: changing a constant of today's code can never change how an old event is read.

The earlier payloads repeat most fields of the current ones on purpose: the current classes evolve
(additively), these never do, so neither may share the other's definitions.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Final

import msgspec

from .envelope import Event
from .vocabulary import EpistemicKind, MemoryType, Veracity

__all__ = [
    "EARLIER_TYPES",
    "UPCASTERS",
    "ActivationDecayedV1",
    "ActivationDecayedV1Payload",
    "FactMentionedV1",
    "FactMentionedV1Payload",
    "FactProposedV1",
    "FactProposedV1Payload",
    "MemoryRetrievedV1",
    "MemoryRetrievedV1Payload",
    "Upcaster",
]

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
"""A pure function turning one version's event dict into the next version's (with its tag)."""

_Unit = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
_Content = Annotated[str, msgspec.Meta(min_length=1, max_length=32_000, pattern=r"\S")]
_Label = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class _Payload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=False, omit_defaults=True):
    """Base of earlier payloads, configured as the catalog's."""


# --- memory.retrieved.v1 ------------------------------------------------------------------------


class MemoryRetrievedV1Payload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """An admitted recall, with the scoring components that made it win."""

    memory_id: str
    query: str = ""
    score: float = 0.0
    components: dict[str, float] = msgspec.field(default_factory=dict)
    boost: float = 0.0


class MemoryRetrievedV1(Event, frozen=True, kw_only=True, tag="memory.retrieved.v1"):
    """A memory was recalled and admitted (v1: the projector chose the boost when ``boost`` was 0,
    and the half-life and floor)."""

    payload: MemoryRetrievedV1Payload


V1_RECALL_BOOST: Final = 0.3
V1_HALF_LIFE_DAYS: Final = 14.0
V1_ACTIVATION_FLOOR: Final = 1e-6
"""The reinforcement the projector applied to every v1 recall (and the decay before it)."""


def memory_retrieved_v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    """A v1 recall with the reinforcement the projector gave it: the boost recorded when positive,
    else 0.3; decay with a 14-day half-life, never below 1e-6."""
    payload = dict(raw["payload"])
    boost = payload.get("boost", 0.0)
    payload.update(
        boost=boost if boost > 0 else V1_RECALL_BOOST,
        half_life_days=V1_HALF_LIFE_DAYS,
        activation_floor=V1_ACTIVATION_FLOOR,
    )
    return {**raw, "type": "memory.retrieved.v2", "payload": payload}


# --- fact.proposed.v1 ---------------------------------------------------------------------------


class FactProposedV1Payload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """A semantic fact was written to a domain/topic (``domain`` is the qualified key:
    ``architecture`` or ``repo:<slug>/architecture``); the fact's mind is the agent that holds it."""

    memory_id: str
    domain: _Label
    topic: _Label
    content: _Content
    epistemic_kind: EpistemicKind = "fact"
    veracity: Veracity = "stated"
    memory_type: MemoryType = "fact"
    role: str = ""
    repo: str | None = None
    confidence: _Unit = 1.0
    valid_until: datetime | None = None
    source_observation_ids: list[str] = msgspec.field(default_factory=list)
    supersedes: str | None = None
    """Set by ``supersede_fact``: the fact this one explicitly replaces."""


class FactProposedV1(Event, frozen=True, kw_only=True, tag="fact.proposed.v1"):
    """A fact was proposed (v1: the projector derived its credibility from its veracity and gave it
    importance and salience 0.5)."""

    payload: FactProposedV1Payload


V1_VERACITY_WEIGHT: Final = {"stated": 1.0, "inferred": 0.7, "tool": 0.5, "imported": 0.6}
"""The veracity weights of every v1 fact event: a proposal's credibility, a mention's rate."""
V1_FACT_IMPORTANCE: Final = 0.5
V1_FACT_SALIENCE: Final = 0.5


def fact_proposed_v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    """A v1 fact with what the projector gave it: its veracity's weight as credibility, importance
    and salience 0.5."""
    payload = dict(raw["payload"])
    payload.update(
        credibility=V1_VERACITY_WEIGHT[payload.get("veracity", "stated")],
        importance=V1_FACT_IMPORTANCE,
        salience=V1_FACT_SALIENCE,
    )
    return {**raw, "type": "fact.proposed.v2", "payload": payload}


# --- fact.mentioned.v1 --------------------------------------------------------------------------


class FactMentionedV1Payload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """The same fact was mentioned again: confidence and mention_count rise instead of duplicating."""

    memory_id: str
    veracity: Veracity = "stated"
    source_observation_ids: list[str] = msgspec.field(default_factory=list)
    merged_from: list[str] = msgspec.field(default_factory=list)
    """Facts merged into this one (consolidate / harmonize); each is superseded by it."""
    reason: str = ""
    mentions: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 1
    """How many mentions this event stands for: a merge counts each merged fact."""


class FactMentionedV1(Event, frozen=True, kw_only=True, tag="fact.mentioned.v1"):
    """An existing fact was mentioned again (v1: the projector derived the confidence rate from the
    veracity and the number of mentions, and capped confidence at 0.99)."""

    payload: FactMentionedV1Payload


V1_MENTION_RATE: Final = 0.25
V1_CONFIDENCE_CAP: Final = 0.99


def fact_mentioned_v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    """A v1 mention with the rate the projector applied — ``0.25 · w`` for one mention by a source
    of veracity weight ``w``, ``1 − (1 − 0.25 · w)^n`` for ``n`` — and the 0.99 cap."""
    payload = dict(raw["payload"])
    one = V1_MENTION_RATE * V1_VERACITY_WEIGHT[payload.get("veracity", "stated")]
    mentions = payload.get("mentions", 1)
    payload.update(
        rate=one if mentions == 1 else 1.0 - (1.0 - one) ** mentions,
        confidence_cap=V1_CONFIDENCE_CAP,
    )
    return {**raw, "type": "fact.mentioned.v2", "payload": payload}


# --- activation.decayed.v1 ----------------------------------------------------------------------


class ActivationDecayedV1Payload(_Payload, frozen=True, kw_only=True, omit_defaults=True):
    """One decay tick for a whole workspace: the projector applies it to every memory in bulk."""

    tick_at: datetime
    half_life_days: Annotated[float, msgspec.Meta(gt=0.0)] = 14.0
    activation_floor: _Unit = 1e-6
    """The activation no memory decays below (1e-6 before it was recorded)."""


class ActivationDecayedV1(Event, frozen=True, kw_only=True, tag="activation.decayed.v1"):
    """Activation decayed up to ``tick_at`` (v1: the projector rewrote every memory of the
    workspace, decayed to the tick)."""

    payload: ActivationDecayedV1Payload


def activation_decayed_v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    """A v1 tick is one that rewrites: the projector decays every memory of the workspace to it, as
    the projector of its time did (a v2 tick lists what faded and rewrites nothing)."""
    return {**raw, "type": "activation.decayed.v2", "payload": {**raw["payload"], "rewrite": True}}


# --- the registry -------------------------------------------------------------------------------

EARLIER_TYPES: dict[str, type[Event]] = {
    str(cls.__struct_config__.tag): cls
    for cls in (MemoryRetrievedV1, FactProposedV1, FactMentionedV1, ActivationDecayedV1)
}
"""Tag → class of every earlier version kept to decode old events as published."""

UPCASTERS: dict[str, Upcaster] = {
    "memory.retrieved.v1": memory_retrieved_v1_to_v2,
    "fact.proposed.v1": fact_proposed_v1_to_v2,
    "fact.mentioned.v1": fact_mentioned_v1_to_v2,
    "activation.decayed.v1": activation_decayed_v1_to_v2,
}
"""Old tag → pure function turning that version's dict into the next version's dict (with its tag).

Chains are followed until a current tag is reached. Old events on the stream are never rewritten.
"""
