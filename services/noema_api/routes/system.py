"""Health, readiness, the audit log and replay status (the OpenAPI document: :mod:`noema_api.routes`)."""

from __future__ import annotations

import msgspec
from starlette.responses import Response

from noema.adapters.jetstream import stream_last_seq_within
from noema.adapters.postgres import ReadModelProjection
from noema.errors import Kind
from noema.runtime import readiness
from noema.runtime.readiness import system_status, unready

from ..endpoint import Endpoint, Req, json_response
from ..errors import ApiError
from ..models import AuditPage, AuditQuery, Health, ReplayStatus, StatusCheck, SystemStatus

__all__ = ["ENDPOINTS"]

PROBE_TIMEOUT_S = 2.0


async def healthz(req: Req[None, None]) -> Health:
    """The process answers."""
    return Health(status="ok")


async def _system(req: Req[None, None]) -> readiness.SystemStatus:
    async def position() -> int:
        async with req.api.pool.acquire() as conn:
            return await ReadModelProjection().position(conn)

    return await system_status(req.api.app.settings, req.api.app.nc, position, timeout=PROBE_TIMEOUT_S)


async def readyz(req: Req[None, None]) -> Response:
    """Readiness of the whole system: the checks of ``noemactl status`` (NATS and the streams,
    PostgreSQL, the projector's lag, every process's heartbeat and consumer progress); 503 with a
    line per problem while any part is down, stalled, lagging or behind. Lost redundancy alone (a
    stream replica's server down, the stream served by the others) or a remote embedding server that
    does not answer (searches go on without the vector voice) is not unready: 200 with status
    ``degraded`` and the problems, until the embed backlog stalls (``NOEMA_STALL_AFTER``), then 503
    naming the embedder as the cause."""
    checks = (await _system(req)).checks
    found = unready(checks)
    if found:
        return json_response(Health(status="unavailable", problems=found), 503)
    degraded = [c.line for c in checks if not c.ok]
    if degraded:  # every part works, with less to spare (or, the embedder away, without vectors)
        return json_response(Health(status="degraded", problems=degraded))
    return json_response(Health(status="ok"))


async def status(req: Req[None, None]) -> SystemStatus:
    """The checks of ``/readyz`` with the per-worker figures (live processes, backlog, rate, drain
    estimate, state): ``noemactl status --json``. System-wide, so only for tokens of all workspaces."""
    if req.principal.workspace is not None:
        raise ApiError(
            Kind.FORBIDDEN,
            f"the system's status is not per workspace: only a token for all workspaces may read it "
            f"(token {req.principal.name!r} is scoped to workspace {req.principal.workspace!r})",
        )
    found = await _system(req)
    return SystemStatus(
        healthy=found.healthy,
        checks=[StatusCheck(name=c.name, ok=c.ok, detail=c.detail) for c in found.checks],
        workers=found.workers,
    )


async def audit(req: Req[AuditQuery, None]) -> AuditPage:
    """Who changed what, when, why and from which event: events newest first."""
    q = req.query
    return await req.api.app.audit(msgspec.structs.replace(q, workspace=req.principal.scope(q.workspace)))


async def replay_status(req: Req[None, None]) -> ReplayStatus:
    """The projection's position against the event stream's last sequence."""
    projection = ReadModelProjection()
    async with req.api.pool.acquire() as conn:
        position = await projection.position(conn)
    last = await stream_last_seq_within(req.api.app.nc, req.api.app.topology.event_stream, PROBE_TIMEOUT_S)
    lag = None if last is None else max(0, last - position)
    return ReplayStatus(
        projection=projection.name,
        position=position,
        stream_last_seq=last,
        lag=lag,
        caught_up=None if lag is None else lag == 0,
    )


ENDPOINTS = (
    Endpoint("GET", "/healthz", healthz, "Liveness", Health, "system", public=True),
    Endpoint(
        "GET",
        "/readyz",
        readyz,
        "Readiness of the whole system (the checks of `noemactl status`)",
        Health,
        "system",
        other=((503, Health),),
        public=True,
    ),
    Endpoint(
        "GET",
        "/v1/status",
        status,
        "The system's checks and per-worker backlog, rate and drain estimate (`noemactl status`)",
        SystemStatus,
        "system",
        errors=(),
    ),
    Endpoint(
        "GET",
        "/v1/audit",
        audit,
        "The audit log: events newest first, filterable by workspace, type and actor",
        AuditPage,
        "audit",
        query=AuditQuery,
        errors=(400,),
    ),
    Endpoint(
        "GET",
        "/v1/replay/status",
        replay_status,
        "How far the read model is behind the event stream",
        ReplayStatus,
        "audit",
        errors=(),
    ),
)
