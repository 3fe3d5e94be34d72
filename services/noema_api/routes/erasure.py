"""Erasure for operators (``POST /v1/erasures``), as ``noemactl erase`` does: content about a
subject, or one memory or observation, erased for good with the record that it happened
(:mod:`noema.application.erasure`, docs/privacy.md). Agents have no such tool."""

from __future__ import annotations

import msgspec

from noema.application.erasure import ErasureReport, ErasureRequest, Scope
from noema.application.views import Name
from noema.errors import Kind
from noema_events.catalog import SubjectKey

from ..endpoint import Endpoint, Req
from ..errors import ApiError
from ..models import Reason

__all__ = ["ENDPOINTS", "ErasureBody"]


class ErasureBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What to erase — exactly one of ``subject``, ``memory``, ``observation`` — and why."""

    workspace: Name
    subject: SubjectKey | None = None
    """A subject key content was tagged with (``observe --subject``, a fact's ``subjects``)."""
    memory: SubjectKey | None = None
    """A memory's or fact's full id."""
    observation: SubjectKey | None = None
    """An observation's id."""
    reason: Reason


async def erase(req: Req[None, ErasureBody]) -> ErasureReport:
    """Erase, and answer what was erased."""
    b = req.body
    req.principal.check(b.workspace)
    targets: tuple[tuple[Scope, str | None], ...] = (
        ("subject", b.subject),
        ("memory", b.memory),
        ("observation", b.observation),
    )
    given = [(scope, value) for scope, value in targets if value]
    if len(given) != 1:
        raise ApiError(Kind.INVALID, "give exactly one of subject, memory, observation")
    req.api.bus()  # 503 while NATS is not connected
    scope, target = given[0]
    request = ErasureRequest(b.workspace, scope, target, b.reason, f"operator:{req.principal.name}")
    return await req.api.app.erase(request)


ENDPOINTS = (
    Endpoint(
        "POST",
        "/v1/erasures",
        erase,
        "Erase content about a subject, or a memory or observation, for good",
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
