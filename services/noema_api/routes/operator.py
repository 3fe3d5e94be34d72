"""Operator actions on memory: enter knowledge, retract, correct, archive, restore.

Each publishes an operator_action naming the token's name as actor, through the application facade
(:class:`noema.application.facade.Noema`).
They answer 202: the events are stored; the read model shows them once the projector applied them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from noema.application import curation
from noema.application.facade import StatusAction

from ..endpoint import Endpoint, Req, scoped_memory_id
from ..models import CorrectBody, KnowledgeBody, OperatorResult, ReasonBody

__all__ = ["ENDPOINTS"]


def _result(receipt: curation.OperatorReceipt) -> OperatorResult:
    return OperatorResult(
        memory_id=receipt.memory_id,
        workspace=receipt.workspace,
        action_event_id=receipt.action_event_id,
        events=list(receipt.events),
    )


def _status_change(action: StatusAction) -> Callable[[Req[None, ReasonBody]], Awaitable[OperatorResult]]:
    async def handle(req: Req[None, ReasonBody]) -> OperatorResult:
        memory_id = await scoped_memory_id(req)
        receipt = await req.api.app.change_status(
            action, memory_id, actor=f"operator:{req.principal.name}", reason=req.body.reason
        )
        return _result(receipt)

    return handle


async def correct(req: Req[None, CorrectBody]) -> OperatorResult:
    """Supersede a memory by a corrected copy (the result names the new memory)."""
    memory_id = await scoped_memory_id(req)
    receipt = await req.api.app.correct(
        memory_id, req.body.content, actor=f"operator:{req.principal.name}", reason=req.body.reason
    )
    return _result(receipt)


async def create(req: Req[None, KnowledgeBody]) -> OperatorResult:
    """Enter a memory as an operator."""
    req.principal.check(req.body.workspace)
    req.api.bus()  # 503 while NATS is not connected
    return _result(await req.api.app.enter_knowledge(req.principal.name, req.body, req.body.reason))


_WRITE_ERRORS = (400, 404, 409, 422, 503)


def _status_endpoint(verb: StatusAction, summary: str) -> Endpoint:
    return Endpoint(
        "POST",
        f"/v1/memories/{{memory_id}}/{verb}",
        _status_change(verb),
        summary,
        OperatorResult,
        "operator",
        body=ReasonBody,
        status=202,
        errors=_WRITE_ERRORS,
    )


ENDPOINTS = (
    Endpoint(
        "POST",
        "/v1/memories",
        create,
        "Enter knowledge as an operator (a memory on the operator channel)",
        OperatorResult,
        "operator",
        body=KnowledgeBody,
        status=202,
        errors=(400, 422, 503),
    ),
    _status_endpoint(
        "retract",
        "Mark a memory inaccurate: it stays visible, retracted, and leaves normal recall",
    ),
    _status_endpoint("archive", "Archive a memory (kept, out of recall, restorable)"),
    _status_endpoint("restore", "Restore a retracted or archived memory"),
    Endpoint(
        "POST",
        "/v1/memories/{memory_id}/correct",
        correct,
        "Correct a memory: a new memory with the corrected content supersedes it",
        OperatorResult,
        "operator",
        body=CorrectBody,
        status=202,
        errors=_WRITE_ERRORS,
    ),
)
