"""Dead letters: list, show, retry, drop — through :class:`noema.adapters.deadletters.DeadLetters`, as
``noemactl dlq`` does.

Dead letters are not per workspace (a poison message may name none, or lie about it), so only a
token for all workspaces may use these endpoints; a workspace-scoped token gets 403.
"""

from __future__ import annotations

from typing import Any

import msgspec

from noema.adapters.deadletters import (
    MAX_SEQ,
    DeadLetterDetail,
    DeadLetterPage,
    DeadLetterQuery,
    DeadLetters,
    DropResult,
    RetryResult,
)
from noema.errors import Kind, NotFound

from ..endpoint import Endpoint, Req
from ..errors import ApiError
from ..models import Reason, ReasonBody

__all__ = ["ENDPOINTS", "RetryBody"]


class RetryBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Why the dead letter is retried (kept in the operator_action event and the audit log)."""

    reason: Reason = "retried after a fix"
    force: bool = False
    """Re-publish it even though it still does not decode as an event (refused with 409 otherwise)."""


def _dead_letters(req: Req[Any, Any]) -> DeadLetters:
    if req.principal.workspace is not None:
        raise ApiError(
            Kind.FORBIDDEN,
            f"dead letters are not per workspace: only a token for all workspaces may use them "
            f"(token {req.principal.name!r} is scoped to workspace {req.principal.workspace!r})",
        )
    req.api.bus()  # 503 while NATS is not connected: dead letters live there
    return req.api.app.dead_letters


def _seq(req: Req[Any, Any]) -> int:
    text = req.path["seq"]
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_SEQ:
        raise NotFound(f"no dead letter {text!r}: a dead letter is named by its sequence, a positive integer")
    return int(text)


async def list_(req: Req[DeadLetterQuery, None]) -> DeadLetterPage:
    """Dead letters newest first."""
    return await _dead_letters(req).list(req.query)


async def show(req: Req[None, None]) -> DeadLetterDetail:
    """One dead letter with its headers and a longer preview."""
    return await _dead_letters(req).show(_seq(req))


async def retry(req: Req[None, RetryBody]) -> RetryResult:
    """Re-publish a dead letter's original to its original subject."""
    dead = _dead_letters(req)
    return await dead.retry(
        _seq(req),
        actor=f"operator:{req.principal.name}",
        reason=req.body.reason,
        now=req.api.clock(),
        force=req.body.force,
    )


async def drop(req: Req[None, ReasonBody]) -> DropResult:
    """Delete a dead letter, recorded as an operator action."""
    dead = _dead_letters(req)
    return await dead.drop(
        _seq(req), actor=f"operator:{req.principal.name}", reason=req.body.reason, now=req.api.clock()
    )


ENDPOINTS = (
    Endpoint(
        "GET",
        "/v1/dead-letters",
        list_,
        "List dead letters, newest first",
        DeadLetterPage,
        "dead letters",
        query=DeadLetterQuery,
        errors=(400, 503),
        description="Same listing as `noemactl dlq list`: messages a worker refused, with the reason, "
        "the source worker, the original subject and sequence. Tokens for all workspaces only.",
    ),
    Endpoint(
        "GET",
        "/v1/dead-letters/{seq}",
        show,
        "One dead letter with its headers and the start of its body",
        DeadLetterDetail,
        "dead letters",
        errors=(404, 503),
        description="Same as `noemactl dlq show`. The body may be any bytes: `preview` shows its start "
        "with invalid UTF-8 and control characters escaped as `\\xNN`.",
    ),
    Endpoint(
        "POST",
        "/v1/dead-letters/{seq}/retry",
        retry,
        "Re-publish a dead letter's original to its original subject (after a fix)",
        RetryResult,
        "dead letters",
        body=RetryBody,
        errors=(400, 404, 409, 422, 503),
        description="Observations only; a truncated original is refused (409). Retrying twice stores it "
        "once. Records an `operator.action` `dlq_retry` and removes the dead letter.",
    ),
    Endpoint(
        "POST",
        "/v1/dead-letters/{seq}/drop",
        drop,
        "Delete a dead letter, recorded as an operator action",
        DropResult,
        "dead letters",
        body=ReasonBody,
        errors=(400, 404, 409, 422, 503),
        description="Records an `operator.action` `dlq_drop` (who, when, why), then deletes the dead letter.",
    ),
)
