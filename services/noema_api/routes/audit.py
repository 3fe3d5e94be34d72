"""The audit questions: why an id is what it is (``GET /v1/why/{id}``) and what changed between two
points of the stream (``GET /v1/audit/diff``), through the application layer
(:class:`noema.application.facade.Noema`) as ``noemactl why`` and ``noemactl audit diff`` do; here
only the token's workspace scope is applied."""

from __future__ import annotations

import msgspec

from noema.adapters.postgres.tenancy import ALL_WORKSPACES, workspace_scope
from noema.errors import NotFound

from ..endpoint import Endpoint, Req
from ..models import AuditDiff, DiffQuery, Why, WhyQuery

__all__ = ["ENDPOINTS"]


async def why(req: Req[WhyQuery, None]) -> Why:
    """The chain of events behind an id, looked for in the token's workspace (or the one asked
    for); another workspace's id is refused (403), as a memory's detail refuses it."""
    ref, q = req.path["id"], req.query
    try:
        return await req.api.app.why(ref, req.principal.scope(q.workspace), q.limit)
    except NotFound:
        if req.principal.workspace is not None:
            # Which workspaces hold it, by the indexed lookups only: 403 rather than 404 there.
            with workspace_scope(ALL_WORKSPACES):
                elsewhere = await req.api.app.memories.reference_workspaces(ref)
            for workspace in elsewhere:
                req.principal.check(workspace)
        raise


async def diff(req: Req[DiffQuery, None]) -> AuditDiff:
    """What changed after ``from`` up to ``to``, in the token's workspace or the one asked for."""
    q = req.query
    return await req.api.app.audit_diff(
        msgspec.structs.replace(q, workspace=req.principal.scope(q.workspace))
    )


ENDPOINTS = (
    Endpoint(
        "GET",
        "/v1/audit/diff",
        diff,
        "What changed between two points of the stream, with the events responsible",
        AuditDiff,
        "audit",
        query=DiffQuery,
        errors=(400,),
        description="Same answer as `noemactl audit diff FROM TO`: the memories created, retracted, "
        "superseded, archived or restored, the facts, conflicts, policies, domains, grants and access "
        "mode changed after `from` up to `to` (included), grouped by kind, each with the events "
        "responsible. A point is a stream sequence or an ISO-8601 time with its zone (compared with "
        "each event's `occurred_at`); anything else is a 400 saying what to write.",
    ),
    Endpoint(
        "GET",
        "/v1/why/{id}",
        why,
        "Why an id is what it is: the chain of events behind it, through causation and correlation",
        Why,
        "audit",
        query=WhyQuery,
        errors=(400, 404),
        description="Same answer as `noemactl why ID`, for an event, memory, fact, policy or "
        "observation id (a memory's unique prefix will do): the events that name it, the causes they "
        "follow from and the events they caused, in stream order, each step with its `parent`; an "
        "observation or recall proposal (they are not events) is a step of its own with the attention "
        "decision about it. Every event carries its payload: the scores, components and rules it "
        "recorded.",
    ),
)
