"""The async client: one NATS connection, the agent's identity, a typed method per operation."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar, Unpack
from urllib.parse import unquote, urlsplit

import msgspec
import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NATS

from .errors import (
    InvalidRequest,
    NoemaError,
    PermissionDenied,
    RequestTimeout,
    ServiceUnavailable,
    error_for_code,
)
from .models import (
    Conflict,
    ConflictList,
    ConsolidateReport,
    FactOutcome,
    HarmonizeReport,
    NotesUpdate,
    ObservationFields,
    ObservationReceipt,
    PolicyChange,
    PolicyOutcome,
    Preamble,
    RecordedObservation,
    SearchResult,
    Why,
)
from .observations import build_observation_event
from .protocol import ERROR_CODE_HEADER, ERROR_HEADER, Reply, agent_subject, observation_subject
from .protocol import agent_user as _agent_user
from .protocol import inbox_prefix as _inbox_prefix
from .refusals import Refusals
from .tracing import trace_headers

__all__ = ["NoemaClient"]

T = TypeVar("T")
Veracity = Literal["stated", "tool", "imported", "inferred"]
MemoryKind = Literal["episodic", "semantic", "procedural", "autobiographical"]

# Errors meaning "the bus is not usable right now" rather than "the request is wrong".
_CONNECTION_ERRORS = (
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionDrainingError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.NoServersError,
)


class NoemaClient:
    """An agent's connection to Noema: ``workspace``, ``agent`` and ``role`` are fixed per client and
    travel in the request subject (never in the arguments).

    Use :meth:`connect` to own a connection, or wrap an existing one: ``NoemaClient(nc, ...)``.
    Every method takes ``timeout`` (seconds, default: the client's) and raises a
    :class:`~noema_sdk.errors.NoemaError` subclass on failure.
    """

    def __init__(
        self,
        nc: NATS,
        *,
        workspace: str,
        agent: str,
        role: str = "agent",
        prefix: str = "noema",
        timeout: float = 10.0,
    ) -> None:
        try:
            # Validates every name once, up front.
            agent_subject(prefix, workspace, role, agent, "ping")
            observation_subject(prefix, workspace, agent)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
        self.nc = nc
        self.workspace = workspace
        self.agent = agent
        self.role = role
        self.prefix = prefix
        self.timeout = timeout
        self._refusals: Refusals | None = None
        """Set by :meth:`connect`: the refusals the server sends the connection it opened."""

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls,
        url: str = "nats://127.0.0.1:4222",
        *,
        workspace: str,
        agent: str,
        role: str = "agent",
        prefix: str = "noema",
        user: str | None = None,
        password: str | None = None,
        creds: str | None = None,
        inbox_prefix: str | None = None,
        tls_ca: str | None = None,
        timeout: float = 10.0,
        connect_timeout: float = 5.0,
        **nats_options: Any,
    ) -> AsyncIterator[NoemaClient]:
        """Connect to NATS and close the connection on exit.

        Credentials: ``user`` and ``password`` (as ``noemactl agent add`` prints them; or in the URL,
        ``nats://user:password@host:port``), or ``creds``, a NATS ``.creds`` file. ``inbox_prefix``
        is where replies arrive; by default the one the server grants this agent's user
        (``_INBOX.agent.<workspace>.<agent>``), so other agents cannot read its replies. ``tls_ca``:
        the CA that signed the server's certificate, for ``tls://`` URLs. Other ``nats_options``
        go to ``nats.connect``. Raises :class:`ServiceUnavailable` when NATS cannot be reached
        within ``connect_timeout`` (or refuses the credentials); once connected, the client
        reconnects on its own."""
        nc = NATS()
        options: dict[str, Any] = {"max_reconnect_attempts": -1, "reconnect_time_wait": 1}
        if user is not None or password is not None:
            options |= {"user": user, "password": password}
        if creds is not None:
            options["user_credentials"] = creds
        named = user or urlsplit(url.split(",")[0]).username
        authenticated = bool(
            named or creds or nats_options.get("token") or nats_options.get("user_credentials")
        )
        if inbox_prefix is None and authenticated:
            inbox_prefix = _inbox_prefix(unquote(named) if named else _agent_user(workspace, agent))
        if inbox_prefix is not None:
            options["inbox_prefix"] = inbox_prefix
        # Refusals end a request at once (PermissionDenied) and are logged, without tracebacks.
        refusals = Refusals(inbox_prefix)
        options["error_cb"] = refusals.error_cb
        if tls_ca is not None or url.startswith("tls://"):
            options["tls"] = ssl.create_default_context(cafile=tls_ca)
        options |= nats_options
        try:
            await asyncio.wait_for(nc.connect(url, **options), connect_timeout)
        except (TimeoutError, OSError, nats.errors.Error) as exc:
            await nc.close()
            raise ServiceUnavailable(
                f"cannot connect to NATS at {_redact(url)} within {connect_timeout:g}s ({exc!r}); "
                "is Noema running (`noemactl up`), is the URL right, and are the credentials those "
                "`noemactl agent add` printed?"
            ) from None
        try:
            client = cls(nc, workspace=workspace, agent=agent, role=role, prefix=prefix, timeout=timeout)
            client._refusals = refusals
            yield client
        finally:
            await nc.close()

    # --- transport ------------------------------------------------------------------------------

    async def _call(self, operation: str, args: dict[str, Any], result: type[T], timeout: float | None) -> T:
        subject = agent_subject(self.prefix, self.workspace, self.role, self.agent, operation)
        # None always means "the default" in the service's inputs, so it is left out.
        payload = msgspec.json.encode({k: v for k, v in args.items() if v is not None})
        wait = self.timeout if timeout is None else timeout
        try:
            # The trace headers let the service continue the caller's trace (an observe's memory).
            msg = await self._request(subject, payload, wait, operation)
        except nats.errors.NoRespondersError:
            raise ServiceUnavailable(
                f"no Noema service answers on {subject}: is it running (`noemactl up`), "
                f"and is the prefix {self.prefix!r} right?",
                operation=operation,
            ) from None
        except nats.errors.TimeoutError:
            raise RequestTimeout(
                f"{operation}: no reply within {wait:g}s (the operation may still have been applied)",
                operation=operation,
            ) from None
        except _CONNECTION_ERRORS as exc:
            raise ServiceUnavailable(f"NATS connection unusable: {exc!r}", operation=operation) from None
        return _decode_reply(operation, msg.data, msg.headers, result)

    async def _request(self, subject: str, payload: bytes, wait: float, operation: str) -> Any:
        """The reply to a request; on a connection :meth:`connect` opened, a request the server
        refuses (the subject, or the inbox replies come to) raises :class:`PermissionDenied` as
        soon as the server says so, instead of waiting for the timeout."""
        request = self.nc.request(subject, payload, timeout=wait, headers=trace_headers())
        if self._refusals is None:
            return await request
        with self._refusals.watching(subject) as refused:
            asking: asyncio.Future[Any] = asyncio.ensure_future(request)
            either: set[asyncio.Future[Any]] = {asking, refused}
            try:
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                asking.cancel()
                raise
            if not asking.done():
                asking.cancel()
                with contextlib.suppress(BaseException):
                    await asking
                raise PermissionDenied(
                    f"{operation}: {refused.result()}: this client's credentials do not allow "
                    f"workspace {self.workspace!r}, agent {self.agent!r}, role {self.role!r} "
                    "(check them against what `noemactl agent add` printed)",
                    operation=operation,
                )
            return asking.result()

    # --- agent operations -----------------------------------------------------------------------

    async def search_memory(
        self,
        query: str,
        *,
        mode: Literal["keyword", "vector", "semantic", "hybrid"] = "hybrid",
        limit: int = 10,
        kinds: Sequence[MemoryKind] = (),
        domains: Sequence[str] = (),
        epistemic_kinds: Sequence[str] = (),
        statuses: Sequence[str] = (),
        mind: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        repo: str | None = None,
        explain: bool = False,
        as_of: int | datetime | None = None,
        timeout: float | None = None,
    ) -> SearchResult:
        """Recall memories of the workspace relevant to ``query`` (hybrid by default); with
        ``explain`` each hit carries its score components. ``statuses`` widens the search beyond
        active memories (e.g. ``["retracted"]``); ``epistemic_kinds`` narrows it (e.g. ``["fact"]``).
        ``as_of`` (a stream sequence or an aware time) answers as of that past point; the result's
        ``as_of`` then says which sequence and time it reflects."""
        args = {
            "query": query,
            "mode": mode,
            "limit": limit,
            "kinds": list(kinds),
            "domains": list(domains),
            "epistemic_kinds": list(epistemic_kinds),
            "statuses": list(statuses),
            "mind": mind,
            "since": since,
            "until": until,
            "repo": repo,
            "explain": explain,
            "as_of": _point(as_of),
        }
        return await self._call("search_memory", args, SearchResult, timeout)

    async def propose_fact(
        self,
        domain: str,
        topic: str,
        content: str,
        *,
        veracity: Veracity = "stated",
        memory_type: str = "fact",
        source_observation_ids: Sequence[str] = (),
        repo: str | None = None,
        valid_until: datetime | None = None,
        subjects: Sequence[str] = (),
        timeout: float | None = None,
    ) -> FactOutcome:
        """Record a fact under ``domain``/``topic``; an equivalent one is strengthened instead, a
        contradicting one is decided by the documented rules. ``subjects``: who or what it is about
        (opaque keys such as ``person:4711``), by which an operator can erase it."""
        args = {
            "domain": domain,
            "topic": topic,
            "content": content,
            "veracity": veracity,
            "memory_type": memory_type,
            "source_observation_ids": list(source_observation_ids),
            "repo": repo,
            "valid_until": valid_until,
            "subjects": list(subjects),
        }
        return await self._call("propose_fact", args, FactOutcome, timeout)

    async def supersede_fact(
        self,
        fact_id: str,
        content: str,
        *,
        reason: str = "",
        veracity: Veracity = "stated",
        timeout: float | None = None,
    ) -> FactOutcome:
        """Replace an active fact; the old one stays, marked superseded."""
        args = {"fact_id": fact_id, "content": content, "reason": reason, "veracity": veracity}
        return await self._call("supersede_fact", args, FactOutcome, timeout)

    async def propose_policy(
        self,
        domain: str,
        rule: str,
        *,
        repo: str | None = None,
        required_role: str | None = None,
        source_fact_ids: Sequence[str] = (),
        timeout: float | None = None,
    ) -> PolicyOutcome:
        """Add a rule to a domain (needs write access: else :class:`PermissionDenied`)."""
        args = {
            "domain": domain,
            "rule": rule,
            "repo": repo,
            "required_role": required_role,
            "source_fact_ids": list(source_fact_ids),
        }
        return await self._call("propose_policy", args, PolicyOutcome, timeout)

    async def supersede_policy(
        self, policy_id: str, rule: str | None = None, *, reason: str = "", timeout: float | None = None
    ) -> PolicyChange:
        """Replace a policy with ``rule``, or deactivate it when ``rule`` is None."""
        args = {"policy_id": policy_id, "rule": rule, "reason": reason}
        return await self._call("supersede_policy", args, PolicyChange, timeout)

    async def remember(
        self,
        session: str,
        content: str,
        *,
        domain: str | None = None,
        topic: str | None = None,
        importance: float | None = None,
        timeout: float | None = None,
    ) -> FactOutcome:
        """Keep a session-scoped item in the hot tier (consolidation may promote it)."""
        args = {
            "session": session,
            "content": content,
            "domain": domain,
            "topic": topic,
            "importance": importance,
        }
        return await self._call("remember", args, FactOutcome, timeout)

    async def consolidate_memory(
        self, *, domain: str | None = None, stale_after_hours: float = 24.0, timeout: float | None = None
    ) -> ConsolidateReport:
        """Promote hot-tier items worth keeping, merge near-duplicate facts, archive stale items."""
        args = {"domain": domain, "stale_after_hours": stale_after_hours}
        return await self._call("consolidate_memory", args, ConsolidateReport, timeout)

    async def harmonize_memory(
        self, *, domain: str | None = None, timeout: float | None = None
    ) -> HarmonizeReport:
        """Reconcile beliefs that diverged between agents."""
        return await self._call("harmonize_memory", {"domain": domain}, HarmonizeReport, timeout)

    async def list_memory_conflicts(
        self,
        *,
        domain: str | None = None,
        limit: int = 50,
        as_of: int | datetime | None = None,
        timeout: float | None = None,
    ) -> list[Conflict]:
        """Recorded conflicts, newest first (``as_of``: as recorded by that past point)."""
        args = {"domain": domain, "limit": limit, "as_of": _point(as_of)}
        return (await self._call("list_memory_conflicts", args, ConflictList, timeout)).conflicts

    async def record_observation(self, content: str, *, timeout: float | None = None) -> RecordedObservation:
        """Note something: appended, timestamped, to your private notes (no other agent reads them;
        use ``observe`` for what should become memory)."""
        return await self._call("record_observation", {"content": content}, RecordedObservation, timeout)

    async def update_my_notes(self, notes: str, *, timeout: float | None = None) -> NotesUpdate:
        """Replace your private scratchpad."""
        return await self._call("update_my_notes", {"notes": notes}, NotesUpdate, timeout)

    async def get_preamble(
        self,
        task: str,
        *,
        repo: str | None = None,
        as_of: int | datetime | None = None,
        timeout: float | None = None,
    ) -> Preamble:
        """The dispatch preamble for ``task``: active policies, your notes, matching facts
        (``as_of``: the preamble you would have been given at that past point)."""
        args = {"task": task, "repo": repo, "as_of": _point(as_of)}
        return await self._call("get_preamble", args, Preamble, timeout)

    async def why(
        self,
        id: str,
        *,
        limit: int = 500,
        as_of: int | datetime | None = None,
        timeout: float | None = None,
    ) -> Why:
        """Why ``id`` (a memory's, fact's, policy's, observation's or event's of your workspace) is
        what it is: the events naming it with their causes and effects, each with its recorded
        decision; what your role may not read is shown as a bare ``cause`` step (``as_of``: as the
        events stored by that past point tell it)."""
        return await self._call("why", {"id": id, "limit": limit, "as_of": _point(as_of)}, Why, timeout)

    # --- observations ---------------------------------------------------------------------------

    async def observe(
        self, content: str, *, timeout: float | None = None, **fields: Unpack[ObservationFields]
    ) -> ObservationReceipt:
        """Publish an observation of this agent through the service (for agents whose credentials
        allow requests only). A retry with the same ``observation_id`` is stored once."""
        build_observation_event(
            content, workspace=self.workspace, mind=self.agent, actor=self.agent, **fields
        )
        return await self._call("observe", {"content": content, **fields}, ObservationReceipt, timeout)

    async def publish_observation(
        self, content: str, *, timeout: float | None = None, **fields: Unpack[ObservationFields]
    ) -> ObservationReceipt:
        """Publish an observation of this agent straight to JetStream, with ``Nats-Msg-Id`` = its
        id: a retry with the same ``observation_id`` is stored once and returns the same sequence."""
        obs_id, event = build_observation_event(
            content, workspace=self.workspace, mind=self.agent, actor=self.agent, **fields
        )
        subject = observation_subject(self.prefix, self.workspace, self.agent)
        wait = self.timeout if timeout is None else timeout
        try:
            ack = await self.nc.jetstream().publish(
                subject, event, timeout=wait, headers={"Nats-Msg-Id": obs_id, **trace_headers()}
            )
        except nats.js.errors.NoStreamResponseError:
            raise ServiceUnavailable(
                f"no stream stores {subject}: is Noema running with prefix {self.prefix!r}?",
                operation="publish_observation",
            ) from None
        except nats.errors.TimeoutError:
            raise RequestTimeout(
                f"publish_observation: no acknowledgement within {wait:g}s; publish again with the "
                f"same observation_id ({obs_id}) to be sure it is stored (once)",
                operation="publish_observation",
            ) from None
        except _CONNECTION_ERRORS as exc:
            raise ServiceUnavailable(
                f"NATS connection unusable: {exc!r}", operation="publish_observation"
            ) from None
        except nats.js.errors.APIError as exc:
            raise NoemaError(
                f"JetStream refused the observation: {exc}", operation="publish_observation"
            ) from None
        return ObservationReceipt(observation_id=obs_id, seq=int(ack.seq), duplicate=bool(ack.duplicate))


def _point(as_of: int | datetime | None) -> int | str | None:
    """An ``as_of`` as the service reads it: a sequence, or an aware time in ISO 8601."""
    if isinstance(as_of, datetime):
        if as_of.tzinfo is None:
            raise ValueError("as_of: give the time with its zone (e.g. datetime.now(UTC))")
        return as_of.isoformat()
    return as_of


def _redact(url: str) -> str:
    """``url`` without its password (error messages end up in logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


def _decode_reply(operation: str, data: bytes, headers: dict[str, str] | None, result: type[T]) -> T:
    """Turn a reply into ``result`` or raise the error it carries (micro headers or JSON body)."""
    try:
        reply = msgspec.json.decode(data, type=Reply) if data else None
    except msgspec.DecodeError:
        reply = None
    code_header = (headers or {}).get(ERROR_CODE_HEADER)
    if code_header or (reply is not None and not reply.ok):
        body = reply.error if reply is not None else None
        code = body.code if body else int(code_header) if code_header and code_header.isdigit() else 500
        message = body.message if body else (headers or {}).get(ERROR_HEADER, "unknown error")
        if not message.startswith(f"{operation}:"):
            message = f"{operation}: {message}"
        raise error_for_code(code, message, operation)
    if reply is None:
        raise NoemaError(f"{operation}: the reply is not a Noema reply ({data[:200]!r})", operation=operation)
    try:
        return msgspec.json.decode(reply.result, type=result)
    except msgspec.ValidationError as exc:
        raise NoemaError(f"{operation}: unexpected result ({exc})", operation=operation) from None
