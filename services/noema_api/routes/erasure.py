"""Erasure for operators (``POST /v1/erasures``), as ``noemactl erase`` does: content about a
subject, or one memory or observation, erased for good with the record that it happened
(:mod:`noema.composition.erasure`, docs/privacy.md). Agents have no such tool."""

from __future__ import annotations

import msgspec

from noema.application.views import Name
from noema.composition.erasure import ErasureReport, ErasureRequest, Scope
from noema_events.catalog import SubjectKey

from ..endpoint import Endpoint, Req
from ..models import Reason

__all__ = ["ENDPOINTS", "ErasureBody"]


class ErasureBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What to erase, and why."""

    workspace: Name
    scope: Scope
    """``subject``: everything tagged with a subject key (``observe --subject``, a fact's
    ``subjects``) and derived from it; ``memory``: one memory or fact; ``observation``: one
    observation and what it became; ``notes``: an agent's notes, every version."""
    target: SubjectKey
    """The subject key, the memory's or observation's full id, or the agent's name."""
    reason: Reason


async def erase(req: Req[None, ErasureBody]) -> ErasureReport:
    """Erase, and answer what was erased."""
    b = req.body
    req.principal.check(b.workspace)
    req.api.bus()  # 503 while NATS is not connected
    request = ErasureRequest(b.workspace, b.scope, b.target, b.reason, f"operator:{req.principal.name}")
    return await req.api.app.erase(request)


ENDPOINTS = (
    Endpoint(
        "POST",
        "/v1/erasures",
        erase,
        "Erase content about a subject, a memory, an observation or an agent's notes, for good",
        ErasureReport,
        "operator",
        body=ErasureBody,
        errors=(400, 403, 404, 422, 503),
        description="Same as `noemactl erase`: the items' data keys are destroyed (their sealed text in "
        "the event stream can never be read again), the read model's copies blanked, the observations "
        "and dead letters deleted. The `content.erased` event records who, when, why and which items. "
        "404 when nothing matches. Then `noemactl compact` removes the old bytes from disk.",
    ),
)
