"""Handling one request: the caller from the subject, the operation, one reply (result or error).

Errors are answered with a JSON body *and* the NATS micro error headers, and counted: in the
endpoint's STATS ``num_errors`` and ``last_error`` (``<code>:<message>``), as the micro protocol
says of every error reply, and per code in its ``data``. (nats-py counts only exceptions that escape
a handler; ours never do, so that every request gets a body that says what went wrong: the counts
are set here.)
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from noema.adapters import tracing
from noema.adapters.micro import MicroRequest, MicroStats
from noema.adapters.postgres.tenancy import workspace_scope
from noema.application.access import Caller
from noema.composition.instance import Instance
from noema.domain.admission import Admission
from noema.errors import SURFACES, Kind, RateLimited, kind_of, public_message
from noema.ids import new_id
from noema_sdk.protocol import encode_error, encode_result, parse_agent_subject

from .operations import Operation

__all__ = ["Dispatcher", "classify"]

log = structlog.get_logger("noema.service")


def classify(exc: BaseException) -> tuple[int, str]:
    """The reply code (the kind's NATS code in :data:`noema.errors.SURFACES`) and message for an
    exception raised while handling a request: the service's one error mapping."""
    kind = kind_of(exc)
    code = SURFACES[kind].nats
    if code is None:  # a kind only HTTP transports report: the service has none of them to raise
        kind, code = Kind.INTERNAL, SURFACES[Kind.INTERNAL].nats
    assert code is not None
    return code, public_message(exc, kind)


MAX_IN_FLIGHT = 64
"""Requests one service process works on at once, all endpoints and callers together; beyond it the
endpoints stop reading (NATS holds the requests) until one ends."""


class Dispatcher:
    """Runs requests against the application layer and keeps per-endpoint error counts.

    The micro library calls one endpoint's handler for one request at a time. The handler starts the
    work in a task of its own and returns, so that one caller's slow requests (a hybrid search
    costs ~130 ms) do not queue every other caller's behind them: requests run side by side, up to
    :data:`MAX_IN_FLIGHT`, and each caller's share is bounded by ``admission`` — its rate and
    concurrency limits (:mod:`noema.domain.admission`), over which it is refused at once (429).
    Stopping the service (which cancels the endpoints' readers) lets the requests in progress
    finish and reply (:meth:`drain`).
    """

    def __init__(
        self, app: Instance, admission: Admission | None = None, max_in_flight: int = MAX_IN_FLIGHT
    ) -> None:
        self._app = app
        self._admission = admission
        self._errors: dict[str, Counter[int]] = {}
        self._last_error: dict[str, str] = {}
        self._in_flight: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(max_in_flight)

    def handler(self, op: Operation) -> Callable[[MicroRequest], Awaitable[None]]:
        """The micro handler of one endpoint."""
        self._errors[op.name] = Counter()

        async def handle(request: MicroRequest) -> None:
            await self._slots.acquire()
            task = asyncio.create_task(self._handle(op, request), name=f"noema-service:{op.name}")
            self._in_flight.add(task)
            task.add_done_callback(self._done)

        return handle

    def _done(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None:  # the reply could not be sent
            log.error("request not answered", error=repr(task.exception()))

    async def drain(self) -> None:
        """Wait for the requests being handled to reply."""
        while self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)

    def _admitted(self, caller: Caller) -> contextlib.AbstractContextManager[None]:
        """The caller's rate and concurrency limits around one request (none without admission)."""
        if self._admission is None:
            return contextlib.nullcontext()
        return self._admission.admitted(f"{caller.workspace}/{caller.agent}", time.monotonic())

    def stats(self, endpoint: MicroStats) -> dict[str, Any]:
        """STATS ``data`` of an endpoint: error replies by code; sets its ``num_errors`` and
        ``last_error`` to the error replies (the library passes the stats it is about to send)."""
        counts = self._errors.get(endpoint.name, Counter())
        errors = sum(counts.values())
        endpoint.num_errors = errors
        endpoint.last_error = self._last_error.get(endpoint.name) or endpoint.last_error
        return {"errors": errors, "errors_by_code": {str(k): v for k, v in counts.items()}}

    async def _handle(self, op: Operation, request: MicroRequest) -> None:
        started = time.perf_counter()
        address = None
        try:
            address = parse_agent_subject(request.subject)
            caller = Caller(address.workspace, address.agent, address.role)
            # Row-level security sees the caller's workspace only (defence in depth).
            # Inside the caller's trace (its request's headers): an observe's memory continues it.
            traced = tracing.serving(request.headers, f"noema.agent {op.name}")
            with self._admitted(caller), workspace_scope(address.workspace), traced:
                body, headers = encode_result(await op.run(self._app, caller, request.data)), None
            code = 200
        except RateLimited as exc:
            code, message = classify(exc)
            self._errors[op.name][code] += 1
            body, headers = encode_error(code, message)
            headers["Retry-After"] = str(exc.retry_after)
        except Exception as exc:
            code, message = classify(exc)
            if code == 500:
                error_id = new_id()
                message = f"internal error (logged as {error_id})"
                log.exception("request failed", operation=op.name, subject=request.subject, error_id=error_id)
            self._errors[op.name][code] += 1
            self._last_error[op.name] = f"{code}:{message}"
            body, headers = encode_error(code, message)
        self._app.metrics.agent_requests.labels(op.name, str(code)).inc()
        try:
            await request.respond(body, headers=headers)
        except ValueError:
            log.warning("request without a reply subject; handled, not answered", subject=request.subject)
        log.info(
            "request handled",
            operation=op.name,
            workspace=address and address.workspace,
            agent=address and address.agent,
            role=address and address.role,
            code=code,
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
        )
