"""The agent tools (requirements §10), defined once: typed inputs, descriptions and what each does, for every
agent-facing surface (the MCP server and the NATS service expose exactly these).

Each tool takes the calling agent's identity (:class:`~noema.application.access.Caller`, from the surface's
configuration or its transport, never from a tool argument) and a validated input Struct, and
returns plain JSON-able data. Unknown input fields are rejected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import Meta

from noema.application.access import Caller
from noema.application.agent_lineage import why_for
from noema.application.facade import Noema, SearchOptions
from noema.errors import Kind, NoemaError
from noema.inputs import InvalidInput, convert, text_dates
from noema.instants import FORMS, Instant
from noema.stream_points import parse_stream_point
from noema_events.bounded import OutOfBounds, Undecodable, check_value_depth, decode_json
from noema_events.catalog import Subjects
from noema_events.vocabulary import EpistemicKind, MemoryStatus
from noema_sdk import models

__all__ = [
    "TOOLS",
    "Tool",
    "ToolInputError",
    "call_tool",
    "decode",
    "decode_input",
    "input_schema",
    "output_schema",
]

T = TypeVar("T")

Text = Annotated[str, msgspec.Meta(min_length=1, max_length=32_000)]
Short = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Reason = Annotated[str, msgspec.Meta(max_length=2_000)]
Veracity = Literal["stated", "tool", "imported", "inferred"]

# Every input field carries a description (Meta, not a docstring: attribute docstrings do not reach
# the JSON Schema that MCP clients and `$SRV.INFO` show agents); a unit test checks that none lacks one.
DOMAIN = "Domain, e.g. 'ops' or 'repo:<slug>/architecture' (created on first use)."
REPO = "Current repository slug: its memories rank first (others are not filtered out)."
VERACITY = (
    "How it is known: stated (a human said it), inferred (you concluded it), tool (a tool's output) "
    "or imported; it seeds the confidence and decides contradictions (stated > inferred > imported > tool)."
)
REASON = "Why (kept with the change and shown in the audit log)."
AS_OF = (
    "Answer as of this past point: an event-stream sequence (e.g. 1200) or a time with its zone "
    "(e.g. '2026-03-02T10:32:00Z'): what was held then, ranked with that moment as now. The answer "
    "carries as_of {seq, time}. Leave it out for the present."
)
AsOfPoint = Annotated[int | str | None, Meta(description=AS_OF)]


class _Input(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Base of tool inputs."""


class SearchMemoryInput(_Input, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """search_memory arguments."""

    query: Annotated[str, msgspec.Meta(min_length=1, max_length=2_000, description="What to recall.")]
    mode: Annotated[
        Literal["keyword", "vector", "semantic", "hybrid"],
        Meta(
            description="hybrid: full text, vectors, recency and the relationship graph fused; "
            "keyword: full text only; vector: embeddings alone; semantic: full text and vectors."
        ),
    ] = "hybrid"
    limit: Annotated[int, Meta(ge=1, le=50, description="At most this many results.")] = 10
    kinds: Annotated[
        list[Literal["episodic", "semantic", "procedural", "autobiographical"]],
        Meta(description="Only these memory kinds (episodic: events; semantic: facts; procedural: how-tos)."),
    ] = []
    domains: Annotated[list[Short], Meta(description="Only memories of these domains, e.g. ['ops'].")] = []
    epistemic_kinds: Annotated[
        list[EpistemicKind],
        Meta(
            description="Only memories of these epistemic kinds (how sure: observation, fact, belief, ...)."
        ),
    ] = []
    statuses: Annotated[
        list[MemoryStatus],
        Meta(description="Only memories of these statuses (default: active and unexpired only)."),
    ] = []
    mind: Annotated[Short | None, Meta(description="Only the memories of this mind (agent).")] = None
    since: Annotated[
        Instant | None, Meta(description=f"Only what happened at or after this time: {FORMS}.")
    ] = None
    until: Annotated[Instant | None, Meta(description=f"Only what happened before this time: {FORMS}.")] = (
        None
    )
    repo: Annotated[Short | None, Meta(description=REPO)] = None
    explain: Annotated[
        bool, Meta(description="Include every score component of each result, the intent and weights.")
    ] = False
    as_of: AsOfPoint = None


class ProposeFactInput(_Input, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """propose_fact arguments."""

    domain: Annotated[
        str, msgspec.Meta(min_length=1, max_length=200, description="e.g. ops, repo:billing/arch")
    ]
    topic: Annotated[
        Short,
        Meta(description="The fact's slot in the domain, e.g. 'deploy-day': facts of one topic compete."),
    ]
    content: Annotated[Text, Meta(description="The fact, as one statement.")]
    veracity: Annotated[Veracity, Meta(description=VERACITY)] = "stated"
    memory_type: Annotated[
        Short,
        Meta(
            description="Decay class: profile, convention, fact, decision, preference, insight, "
            "observation, event, task, request or commitment."
        ),
    ] = "fact"
    source_observation_ids: Annotated[
        list[Short], Meta(description="Ids of the observations it comes from (provenance).")
    ] = []
    repo: Annotated[
        Short | None, Meta(description="Scope the domain to this repository (repo:<slug>/<domain>).")
    ] = None
    valid_until: Annotated[
        Instant | None,
        Meta(description=f"When it stops being true (it then leaves recall): {FORMS}."),
    ] = None
    subjects: Annotated[
        Subjects,
        Meta(
            description="Who or what it is about, as opaque keys (e.g. person:4711): an operator "
            "can erase everything about a subject by its key."
        ),
    ] = []


class SupersedeFactInput(_Input, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """supersede_fact arguments."""

    fact_id: Annotated[Short, Meta(description="Id of the active fact to replace.")]
    content: Annotated[Text, Meta(description="The new statement.")]
    reason: Annotated[Reason, Meta(description=REASON)] = ""
    veracity: Annotated[Veracity, Meta(description=VERACITY)] = "stated"


class ProposePolicyInput(_Input, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """propose_policy arguments."""

    domain: Annotated[Short, Meta(description=DOMAIN)]
    rule: Annotated[
        Text, Meta(description="The normative rule, e.g. 'Never deploy without a rollback plan'.")
    ]
    repo: Annotated[
        Short | None, Meta(description="Scope the policy's domain to this repository (repo:<slug>/<domain>).")
    ] = None
    required_role: Annotated[
        Short | None, Meta(description="The role the rule is meant for (advisory: shown, not enforced).")
    ] = None
    source_fact_ids: Annotated[list[Short], Meta(description="Ids of the facts the rule rests on.")] = []


class SupersedePolicyInput(_Input, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """supersede_policy arguments."""

    policy_id: Annotated[Short, Meta(description="Id of the active policy to replace.")]
    rule: Annotated[Text | None, Meta(description="The new rule; leave it out to deactivate the policy.")] = (
        None
    )
    reason: Annotated[Reason, Meta(description=REASON)] = ""


class RememberInput(_Input, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """remember arguments."""

    session: Annotated[
        Short,
        Meta(
            description="Your current session's id: the note is scoped to it "
            "(the same note twice in a session is kept once)."
        ),
    ]
    content: Annotated[Text, Meta(description="What to keep.")]
    domain: Annotated[
        Short | None, Meta(description="Domain it belongs to (a promoted fact lands there).")
    ] = None
    topic: Annotated[Short | None, Meta(description="Topic inside the domain.")] = None
    importance: Annotated[
        Annotated[float, Meta(ge=0.0, le=1.0)] | None,
        Meta(description="How much it matters, 0..1; from 0.6 consolidate_memory promotes it to a fact."),
    ] = None


class ConsolidateInput(_Input, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """consolidate_memory arguments."""

    domain: Annotated[Short | None, Meta(description="Only this domain (default: every domain).")] = None
    stale_after_hours: Annotated[
        float,
        Meta(ge=0.0, le=24 * 365, description="Archive hot-tier items older than this many hours."),
    ] = 24.0


class HarmonizeInput(_Input, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """harmonize_memory arguments."""

    domain: Annotated[Short | None, Meta(description="Only this domain (default: every domain).")] = None


class ListConflictsInput(_Input, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """list_memory_conflicts arguments."""

    domain: Annotated[Short | None, Meta(description="Only this domain's conflicts.")] = None
    limit: Annotated[int, Meta(ge=1, le=500, description="At most this many, newest first.")] = 50
    as_of: AsOfPoint = None


class RecordObservationInput(_Input, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """record_observation arguments."""

    content: Annotated[Text, Meta(description="What you observed, in a sentence or two.")]


class UpdateNotesInput(_Input, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """update_my_notes arguments."""

    notes: Annotated[
        str, Meta(max_length=32_000, description="Your whole scratchpad (replaces it; empty clears it).")
    ]


class PreambleInput(_Input, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """get_preamble arguments."""

    task: Annotated[
        str,
        Meta(
            max_length=8_000,
            description="The task you are starting, in a sentence: facts are matched for a task of 20 "
            "characters or more (a shorter one, e.g. two words, gets policies and notes only).",
        ),
    ]
    repo: Annotated[
        Short | None, Meta(description="Current repository slug: its facts and policies rank first.")
    ] = None
    as_of: AsOfPoint = None


class WhyInput(_Input, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """why arguments."""

    id: Annotated[
        str,
        Meta(
            min_length=6,
            max_length=200,
            pattern=r"^[^\s/\x00]+$",
            description="An id of your workspace: a memory's or fact's, a policy's or an event's (or 6+ "
            "characters of one of those), or an observation's.",
        ),
    ]
    limit: Annotated[
        int, Meta(ge=1, le=5_000, description="At most this many events name the id (and as many follow).")
    ] = 500
    as_of: AsOfPoint = None


class ToolInputError(NoemaError, ValueError):
    """The input does not match the tool's schema; the message says where."""

    kind = Kind.INVALID


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


async def _search(app: Noema, who: Caller, a: SearchMemoryInput) -> Any:
    options = SearchOptions(
        mode=a.mode,
        limit=a.limit,
        kinds=tuple(a.kinds),
        epistemic_kinds=tuple(a.epistemic_kinds),
        statuses=tuple(a.statuses),
        domains=tuple(a.domains),
        mind=a.mind,
        since=a.since,
        until=a.until,
        repo=a.repo,
    )
    response = await app.search(who, a.query, options)
    results = []
    for r in response.results:
        m = r.memory
        item: dict[str, Any] = {
            "id": r.id,
            "content": r.content,
            "score": round(r.score, 6),
            "kind": m.get("kind"),
            "epistemic_kind": m.get("epistemic_kind"),
            "domain": m.get("domain"),
            "topic": m.get("topic"),
            "mind": m.get("mind"),
            "when": m.get("happened_at") or m.get("created_at"),
            "confidence": m.get("confidence"),
        }
        if a.explain:
            item["components"] = r.components
        results.append(item)
    out: dict[str, Any] = {"query": response.query, "mode": response.mode, "results": results}
    if a.explain:
        out["intent"] = response.intent
        out["weights"] = response.weights
    if response.unavailable:
        out["unavailable"] = response.unavailable
    return out


async def _propose_fact(app: Noema, who: Caller, a: ProposeFactInput) -> Any:
    return await app.knowledge.propose_fact(
        who,
        a.domain,
        a.topic,
        a.content,
        veracity=a.veracity,
        memory_type=a.memory_type,
        source_observation_ids=a.source_observation_ids,
        repo=a.repo,
        valid_until=a.valid_until,
        subjects=a.subjects,
    )


async def _supersede_fact(app: Noema, who: Caller, a: SupersedeFactInput) -> Any:
    return await app.knowledge.supersede_fact(who, a.fact_id, a.content, reason=a.reason, veracity=a.veracity)


async def _propose_policy(app: Noema, who: Caller, a: ProposePolicyInput) -> Any:
    policy_id = await app.knowledge.propose_policy(
        who, a.domain, a.rule, repo=a.repo, required_role=a.required_role, source_fact_ids=a.source_fact_ids
    )
    return {"policy_id": policy_id}


async def _supersede_policy(app: Noema, who: Caller, a: SupersedePolicyInput) -> Any:
    old = await app.knowledge.resolve_policy_id(who, a.policy_id)
    new = await app.knowledge.supersede_policy(who, old, a.rule, reason=a.reason)
    return {"policy_id": new, "superseded": old, "deactivated": new is None}


async def _remember(app: Noema, who: Caller, a: RememberInput) -> Any:
    return await app.knowledge.remember(
        who, a.session, a.content, domain=a.domain, topic=a.topic, importance=a.importance
    )


async def _consolidate(app: Noema, who: Caller, a: ConsolidateInput) -> Any:
    return await app.knowledge.consolidate(who, a.domain, stale_after=timedelta(hours=a.stale_after_hours))


async def _harmonize(app: Noema, who: Caller, a: HarmonizeInput) -> Any:
    return await app.knowledge.harmonize(who, a.domain)


async def _conflicts(app: Noema, who: Caller, a: ListConflictsInput) -> Any:
    return {"conflicts": await app.knowledge.list_conflicts(who, a.domain, a.limit)}


async def _record_observation(app: Noema, who: Caller, a: RecordObservationInput) -> Any:
    return {"agent": who.agent, "line": await app.knowledge.record_observation(who, a.content)}


async def _update_notes(app: Noema, who: Caller, a: UpdateNotesInput) -> Any:
    await app.knowledge.update_my_notes(who, a.notes)
    return {"agent": who.agent, "characters": len(a.notes)}


async def _preamble(app: Noema, who: Caller, a: PreambleInput) -> Any:
    p = await app.preamble(who, a.task, a.repo)
    return {"text": p.text, "policies": p.policies, "notes": p.notes, "facts": p.facts}


async def _why(app: Noema, who: Caller, a: WhyInput) -> Any:
    return msgspec.to_builtins(await why_for(app.memories, app.access, who, a.id, a.limit))


@dataclass(frozen=True)
class Tool:
    """One agent tool: its name, what it is for, its input type and what it does."""

    name: str
    description: str
    input: type[_Input]
    output: type[msgspec.Struct]
    """What it returns, as the SDK reads it (:mod:`noema_sdk.models`, the one description of each
    agent operation's result): its JSON Schema is the MCP tool's ``outputSchema`` and the bus
    contract's reply schema. The tool builds plain data, never this type."""
    run: Callable[[Noema, Caller, Any], Awaitable[Any]]
    mutates: bool


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            "search_memory",
            "Recall memories relevant to a query from your workspace: hybrid (default) fuses full text, "
            "vectors, recency and the relationship graph; keyword is full text only; vector is embeddings "
            "alone; semantic is full text + vectors. With explain=true each result carries its score "
            "components.",
            SearchMemoryInput,
            models.SearchResult,
            _search,
            False,
        ),
        Tool(
            "propose_fact",
            "Record a fact in a domain (e.g. 'ops' or 'repo:<slug>/architecture') under a topic (its "
            "slot). The same fact again raises its confidence; a contradicting fact in the same topic is "
            "decided by documented rules (explicit > veracity > confidence > recency) and the loser is "
            "superseded, never deleted.",
            ProposeFactInput,
            models.FactOutcome,
            _propose_fact,
            True,
        ),
        Tool(
            "supersede_fact",
            "Replace an active fact (by id) with new content; the old one stays, marked superseded.",
            SupersedeFactInput,
            models.FactOutcome,
            _supersede_fact,
            True,
        ),
        Tool(
            "propose_policy",
            "Add a normative rule to a domain; every dispatch preamble carries active policies. Needs "
            "write access to the domain (else an InsufficientMemoryPermission error).",
            ProposePolicyInput,
            models.PolicyOutcome,
            _propose_policy,
            True,
        ),
        Tool(
            "supersede_policy",
            "Replace an active policy with a new rule, or deactivate it when no rule is given.",
            SupersedePolicyInput,
            models.PolicyChange,
            _supersede_policy,
            True,
        ),
        Tool(
            "remember",
            "Keep a session-scoped note in the hot tier; consolidate_memory promotes important or "
            "repeated items to facts and archives stale ones.",
            RememberInput,
            models.FactOutcome,
            _remember,
            True,
        ),
        Tool(
            "consolidate_memory",
            "Promote hot-tier items worth keeping to facts, merge near-duplicate facts (provenance kept) "
            "and archive stale hot-tier items; reports what changed.",
            ConsolidateInput,
            models.ConsolidateReport,
            _consolidate,
            True,
        ),
        Tool(
            "harmonize_memory",
            "Reconcile beliefs that diverged between agents: agreeing facts become one corroborated fact "
            "(confidence raised), contradicting ones are decided and recorded as conflicts.",
            HarmonizeInput,
            models.HarmonizeReport,
            _harmonize,
            True,
        ),
        Tool(
            "list_memory_conflicts",
            "List recorded conflicts (newest first) with both sides and the rule that decided.",
            ListConflictsInput,
            models.ConflictList,
            _conflicts,
            False,
        ),
        Tool(
            "record_observation",
            "Note something you observed: appended, timestamped, to your private notes (only you and "
            "operators can read them; no other agent's search finds them).",
            RecordObservationInput,
            models.RecordedObservation,
            _record_observation,
            True,
        ),
        Tool(
            "update_my_notes",
            "Replace your private scratchpad (only you and operators can read it); it is given to you "
            "verbatim at your next dispatch.",
            UpdateNotesInput,
            models.NotesUpdate,
            _update_notes,
            True,
        ),
        Tool(
            "get_preamble",
            "The dispatch preamble for a task: active policies, your notes and up to five facts matching "
            "the task (described in 20 characters or more; a shorter task gets no facts).",
            PreambleInput,
            models.Preamble,
            _preamble,
            False,
        ),
        Tool(
            "why",
            "Why an id is what it is: the events that name it, in stream order, with the causes they "
            "follow from and what they caused (each with its actor, time and recorded decision: "
            "attention scores, recall components, the conflict rule that superseded a fact). Only "
            "your workspace, and only what your role may read.",
            WhyInput,
            models.Why,
            _why,
            False,
        ),
    )
}
"""Every agent tool by name."""


def input_schema(tool: Tool) -> dict[str, Any]:
    """The tool input's JSON Schema, self-contained (definitions inlined under ``$defs``)."""
    # Dates are read by noema.inputs.convert, not only RFC 3339.
    return _self_contained(tool.input, text_dates)


def output_schema(tool: Tool) -> dict[str, Any]:
    """The JSON Schema of the tool's result (its MCP ``outputSchema``), self-contained."""
    return _self_contained(tool.output, lambda components: components)


def _self_contained(
    struct: type[msgspec.Struct], adapt: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    (schema,), components = msgspec.json.schema_components([struct], ref_template="#/$defs/{name}")
    components = adapt(components)
    name = schema["$ref"].rsplit("/", 1)[1]
    body = dict(components[name])
    others = {k: v for k, v in components.items() if k != name}
    if others:
        body["$defs"] = others
    return body


def _has_nul(value: Any) -> bool:
    if isinstance(value, bytes | bytearray):
        return b"\\u0000" in value or b"\x00" in value
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False


def decode_input(tool: Tool, raw: bytes | dict[str, Any]) -> Any:
    """Validate raw JSON (bytes) or decoded arguments against the tool's input type."""
    return decode(tool.name, tool.input, raw)


def decode(name: str, struct: type[T], raw: bytes | dict[str, Any]) -> T:
    """Raw JSON (bytes) or decoded arguments as ``struct``, read by :func:`noema.inputs.convert` (as
    every surface reads its input: dates included); a refusal is a :class:`ToolInputError` naming
    the operation ``name``."""
    try:  # bounded (noema_events.bounded): bytes before they are parsed, arguments an SDK decoded
        if isinstance(raw, bytes | bytearray):
            raw = decode_json(raw or b"{}", what="the input")
        else:
            check_value_depth(raw, what="the input")
    except OutOfBounds as exc:
        raise ToolInputError(f"{name}: {exc}") from None
    except Undecodable as exc:
        raise ToolInputError(f"{name}: input is not JSON ({exc})") from None
    if _has_nul(raw):
        raise ToolInputError(f"{name}: text must not contain NUL characters")
    try:
        return convert(struct, raw)
    except InvalidInput as exc:
        raise ToolInputError(f"{name}: {exc}") from None


async def call_tool(app: Noema, who: Caller, name: str, raw: bytes | dict[str, Any]) -> Any:
    """Run tool ``name`` for ``who``; returns JSON-able data. Raises ToolInputError, OperationError
    (incl. InsufficientMemoryPermission) or KeyError for an unknown tool."""
    tool = TOOLS[name]
    args = decode_input(tool, raw)
    as_of = getattr(args, "as_of", None)
    if as_of is None:
        return _plain(await tool.run(app, who, args))
    # A read as of a past point: the same tool over the state then (a bad point is ``invalid``).
    view = await app.as_of(parse_stream_point(str(as_of), f"{name}: as_of"))
    assert view.point is not None
    return {**_plain(await tool.run(view, who, args)), "as_of": view.point.describe()}
