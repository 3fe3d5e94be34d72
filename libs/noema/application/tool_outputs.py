"""What each agent tool returns, as types: their JSON Schemas are the tools' ``outputSchema`` (MCP
hosts and SDKs check a result's structured content against it), so a result that drifts from them
fails the tests that call every tool.

The tools build plain dicts (:mod:`noema.application.tools`); these Structs describe them and are
never instantiated. Properties may be added in later releases (no ``additionalProperties: false``).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from noema.application.audit_views import Why

__all__ = [
    "AsOfOutput",
    "ConflictsOutput",
    "ConsolidateOutput",
    "FactOutput",
    "HarmonizeOutput",
    "NotesOutput",
    "ObservationOutput",
    "PolicyOutput",
    "PreambleOutput",
    "SearchMemoryOutput",
    "SupersedePolicyOutput",
    "WhyOutput",
]


class _Output(msgspec.Struct, frozen=True, kw_only=True):
    """Base of tool outputs."""


class AsOfOutput(_Output, frozen=True, kw_only=True):
    """The past point a read answered for."""

    seq: Annotated[int, Meta(description="The event-stream sequence the answer reflects.")]
    time: Annotated[str, Meta(description="The time of that event (RFC 3339).")]


AsOf = Annotated[AsOfOutput | None, Meta(description="Present when as_of was given: the point answered for.")]


class SearchHit(_Output, frozen=True, kw_only=True):
    """One recalled memory."""

    id: Annotated[str, Meta(description="The memory's id (for why, supersede_fact, …).")]
    content: Annotated[str, Meta(description="What the memory says.")]
    score: Annotated[float, Meta(description="Its fused score; results come best first.")]
    kind: Annotated[str | None, Meta(description="episodic, semantic, procedural or autobiographical.")]
    epistemic_kind: Annotated[str | None, Meta(description="How sure: observation, fact, belief, …")]
    domain: Annotated[str | None, Meta(description="Its domain, if any.")]
    topic: Annotated[str | None, Meta(description="Its topic in the domain, if any.")]
    mind: Annotated[str | None, Meta(description="The mind (agent) it belongs to.")]
    when: Annotated[str | None, Meta(description="When it happened (else when it was recorded), RFC 3339.")]
    confidence: Annotated[float | None, Meta(description="How confident the memory is, 0..1.")]
    components: Annotated[
        dict[str, float] | None, Meta(description="With explain: every component of the score.")
    ] = None


class SearchMemoryOutput(_Output, frozen=True, kw_only=True):
    """search_memory's answer."""

    query: Annotated[str, Meta(description="The query as searched.")]
    mode: Annotated[str, Meta(description="The mode that ranked the results.")]
    results: Annotated[list[SearchHit], Meta(description="The memories recalled, best first.")]
    intent: Annotated[str | None, Meta(description="With explain: how the query was read.")] = None
    weights: Annotated[
        dict[str, float] | None, Meta(description="With explain: each voice's weight in the fusion.")
    ] = None
    as_of: AsOf = None


class FactOutput(_Output, frozen=True, kw_only=True):
    """What propose_fact, supersede_fact and remember did."""

    outcome: Annotated[
        str,
        Meta(description="proposed (a new fact), mentioned (an equivalent one was repeated), remembered, …"),
    ]
    memory_id: Annotated[str, Meta(description="The fact's (or hot-tier item's) memory id.")]
    domain: Annotated[str, Meta(description="The domain it was recorded in.")]
    topic: Annotated[str, Meta(description="Its topic.")]


class PolicyOutput(_Output, frozen=True, kw_only=True):
    """propose_policy's answer."""

    policy_id: Annotated[str, Meta(description="The new policy's id.")]


class SupersedePolicyOutput(_Output, frozen=True, kw_only=True):
    """supersede_policy's answer."""

    policy_id: Annotated[str | None, Meta(description="The replacing policy's id (null: deactivated).")]
    superseded: Annotated[str, Meta(description="The id of the policy replaced.")]
    deactivated: Annotated[bool, Meta(description="True when no rule was given: the policy just ends.")]


class ConsolidateOutput(_Output, frozen=True, kw_only=True):
    """What consolidate_memory changed (memory ids)."""

    promoted: Annotated[
        list[dict[str, Any]], Meta(description="Hot-tier items promoted to facts ({hot_id, fact_id, …}).")
    ]
    merged: Annotated[list[dict[str, Any]], Meta(description="Near-duplicate facts merged into one.")]
    archived: Annotated[list[str], Meta(description="Ids of the stale hot-tier items archived.")]
    skipped: Annotated[
        list[dict[str, str]],
        Meta(description="Items worth promoting into a domain your role may not write (strict mode)."),
    ]


class HarmonizeOutput(_Output, frozen=True, kw_only=True):
    """What harmonize_memory changed."""

    corroborated: Annotated[
        list[dict[str, Any]], Meta(description="Agreeing facts made one ({kept, merged, agents}).")
    ]
    conflicts: Annotated[list[dict[str, str]], Meta(description="Contradictions decided and recorded.")]


class ConflictsOutput(_Output, frozen=True, kw_only=True):
    """list_memory_conflicts' answer."""

    conflicts: Annotated[
        list[dict[str, Any]],
        Meta(
            description="Recorded conflicts, newest first: both sides (winner_id, loser_id, …) and the rule."
        ),
    ]
    as_of: AsOf = None


class ObservationOutput(_Output, frozen=True, kw_only=True):
    """record_observation's answer."""

    agent: Annotated[str, Meta(description="Whose notes got the line (yours).")]
    line: Annotated[str, Meta(description="The line appended, with its timestamp.")]


class NotesOutput(_Output, frozen=True, kw_only=True):
    """update_my_notes' answer."""

    agent: Annotated[str, Meta(description="Whose notes were replaced (yours).")]
    characters: Annotated[int, Meta(description="The length of the notes now kept.")]


class PreambleOutput(_Output, frozen=True, kw_only=True):
    """get_preamble's answer."""

    text: Annotated[str, Meta(description="The preamble to read before the task (Markdown).")]
    policies: Annotated[list[str], Meta(description="The active policies it carries.")]
    notes: Annotated[str | None, Meta(description="Your private notes, if any.")]
    facts: Annotated[list[str], Meta(description="Up to five facts matching the task.")]
    as_of: AsOf = None


class WhyOutput(Why, frozen=True, kw_only=True):
    """why: the chain of events behind an id (:class:`~noema.application.audit_views.Why`)."""

    as_of: AsOf = None
