"""Dead letters, for operators: list, show, retry (re-drive) and drop the messages workers refused.

A dead letter is a message on the dead-letter stream (``<PREFIX>_DEADLETTER``, subject
``<prefix>.dlq.<source>``): the original bytes (truncated above the policy's size, see
:mod:`noema.adapters.dlq_policy`) with headers telling who refused it, why, and where it came from.
Everything here talks to JetStream only (no SQL), so it works while the read model is down; the CLI
(``noemactl dlq``) and the HTTP API (``/v1/dead-letters``) both call :class:`DeadLetters`.

- **retry** re-publishes the stored original to its original subject, with a ``Nats-Msg-Id``
  derived from the dead letter (not the original's: JetStream's duplicate window would drop it), so
  retrying a retry stores it once; then records an ``operator.action`` ``dlq_retry`` and removes the
  dead letter (if the worker refuses it again, it comes back as a new dead letter). Only observation
  stream messages are retried: an event's original is still on the event stream, the source of
  truth, and a second copy there would be applied twice by a replay.
- **drop** records an ``operator.action`` ``dlq_drop`` (who, when, why), then deletes the dead letter.

Each removes the dead letter last, and every id it publishes is derived from the dead letter: after a
crash half-way, doing it again stores nothing twice and still leaves the record.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec
from nats.aio.client import Client as NATS
from nats.js.api import RawStreamMsg
from nats.js.errors import APIError, NotFoundError

from noema.adapters.dlq_policy import ORIGINAL_SHA256, ORIGINAL_SIZE, TRUNCATED
from noema.adapters.jetstream import EventPublisher
from noema.errors import Conflict, NotFound, OperationError
from noema.ids import derive_id
from noema.instants import Instant
from noema.topology import Topology
from noema_events import EventDecodeError, OperatorAction, OperatorActionPayload, decode_event
from noema_events.envelope import NAME_PATTERN
from noema_sdk.tracing import carried

__all__ = [
    "MAX_SEQ",
    "NO_WORKSPACE",
    "DeadLetter",
    "DeadLetterDetail",
    "DeadLetterPage",
    "DeadLetterQuery",
    "DeadLetters",
    "DropResult",
    "RetryResult",
    "preview",
]

NO_WORKSPACE = "_noema"
"""The workspace an operator action on a dead letter is recorded in when its original subject names
no valid workspace (a poison message may have none)."""

LIST_PREVIEW = 160
"""Bytes of the original shown in a listing."""
SHOW_PREVIEW = 4096
"""Bytes of the original shown by ``show``."""
_SCAN_BUDGET = 5000
"""Stream sequences one listing page examines at most; past it the page ends with ``next_before``."""
_CHUNK = 32
"""Messages fetched concurrently while scanning (each get is one JetStream API request)."""
_WRONG_STREAM = 10060
"""JetStream's error code when ``Nats-Expected-Stream`` does not hold."""
_DELETE_FAILED = 10057
"""JetStream's error code when a delete fails: denied by the stream, or no such message."""
MAX_SEQ = 2**63 - 1
"""The highest sequence a dead letter can have (JetStream's are 64-bit)."""

_Source = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
_Seq = Annotated[int, msgspec.Meta(ge=1, le=MAX_SEQ)]
_Limit = Annotated[int, msgspec.Meta(ge=1, le=200)]
_NAME = re.compile(NAME_PATTERN)
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class _In(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of inputs: unknown fields are refused."""


class _Out(msgspec.Struct, frozen=True, kw_only=True):
    """Base of outputs."""


class DeadLetterQuery(_In, frozen=True, kw_only=True):
    """Dead letters, newest first: of one ``source`` (worker), stored at or after ``since``;
    ``before`` (a dead-letter sequence, the previous page's ``next_before``) pages back."""

    source: _Source | None = None
    since: Instant | None = None
    before: _Seq | None = None
    limit: _Limit = 50


class DeadLetter(_Out, frozen=True, kw_only=True):
    """One dead letter: why and by whom it was refused, where it came from, what it holds."""

    seq: int
    """Its sequence on the dead-letter stream: how ``show``, ``retry`` and ``drop`` name it."""
    source: str
    """The worker that refused it (attend, projector, retrieve, ...)."""
    reason: str
    original_subject: str | None
    original_stream: str | None
    original_seq: int | None
    workspace: str | None
    """The workspace its original subject names (None when it names no valid one)."""
    deliveries: int | None
    """How many times it had been delivered when it was dead-lettered (unknown on old ones)."""
    dead_lettered_at: datetime
    """When it was dead-lettered (the stream's storage time on dead letters that do not say)."""
    size: int
    """Bytes of the original (of the whole original, also when only its start is stored)."""
    stored_size: int
    """Bytes stored on the dead-letter stream."""
    truncated: bool
    """Only the start of the original is stored (it cannot be retried)."""
    sha256: str
    """SHA-256 of the whole original."""
    utf8: bool
    """The stored bytes are valid UTF-8 (else the preview shows the invalid bytes escaped)."""
    preview: str
    """The start of the stored bytes, safe to print: invalid UTF-8 and control characters escaped."""


class DeadLetterDetail(DeadLetter, frozen=True, kw_only=True):
    """A dead letter with a longer preview and every header it was stored with."""

    headers: dict[str, str]


class DeadLetterPage(_Out, frozen=True, kw_only=True):
    """Dead letters, newest first; pass ``next_before`` as ``before`` for the next page (null at the end)."""

    items: list[DeadLetter]
    next_before: int | None
    next: str | None = None
    """The next page's URL (path and query string; the HTTP API fills it in, and sends it as a
    ``Link: <...>; rel="next"`` header too); null on the last page."""


class RetryResult(_Out, frozen=True, kw_only=True):
    """What a retry did: where the original went again, and the operator action recorded."""

    seq: int
    subject: str
    stream: str
    stream_seq: int
    """Its new sequence on ``stream``."""
    duplicate: bool
    """It had already been re-published (a retried retry): stored once."""
    msg_id: str
    action_event_id: str
    removed: bool
    """The dead letter was removed from the dead-letter stream (false on a stream that denies it)."""


class DropResult(_Out, frozen=True, kw_only=True):
    """What a drop did: the dead letter deleted and the operator action recorded."""

    seq: int
    action_event_id: str


def preview(data: bytes, limit: int) -> str:
    """The first ``limit`` bytes of ``data`` as printable text: invalid UTF-8 as ``\\xNN``, control
    characters (but newline and tab) as ``\\xNN``, and ``…`` when there is more."""
    text = data[:limit].decode("utf-8", errors="backslashreplace")
    text = _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return text + ("…" if len(data) > limit else "")


def _printable(text: str, limit: int) -> str:
    return preview(text.encode("utf-8", errors="backslashreplace"), limit)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _when(value: str | None, stored: datetime) -> datetime:
    if value:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return stored
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return stored


def _reason(reason: str) -> str:
    reason = reason.strip()
    if not reason:
        raise OperationError("a reason is required")
    if len(reason) > 2_000:
        raise OperationError("the reason is too long (at most 2000 characters)")
    return reason


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


@dataclass(frozen=True)
class DeadLetters:
    """The dead-letter stream of one instance, as operators handle it."""

    nc: NATS
    topology: Topology
    publisher: EventPublisher

    @property
    def stream(self) -> str:
        """The dead-letter stream's name."""
        return self.topology.dead_letter_stream

    def workspace_of(self, subject: str | None) -> str | None:
        """The workspace an observation or event subject names (None for any other, or a bad name)."""
        workspace = self.topology.workspace_of_subject(subject or "")
        return workspace if workspace is not None and _NAME.match(workspace) else None

    def _fields(self, raw: RawStreamMsg, preview_bytes: int) -> dict[str, Any]:
        headers = {str(k): str(v) for k, v in (raw.headers or {}).items()}
        data = bytes(raw.data or b"")
        truncated = headers.get(TRUNCATED, "").lower() == "true"
        subject = headers.get("Noema-Original-Subject")
        source = headers.get("Noema-Source") or (raw.subject or "").removeprefix(
            self.topology.dead_letter_subject("")
        )
        return {
            "seq": int(raw.seq or 0),
            "source": source,
            "reason": headers.get("Noema-Error", ""),
            "original_subject": subject,
            "original_stream": headers.get("Noema-Original-Stream"),
            "original_seq": _int(headers.get("Noema-Original-Seq")),
            "workspace": self.workspace_of(subject),
            "deliveries": _int(headers.get("Noema-Deliveries")),
            "dead_lettered_at": _when(headers.get("Noema-Dead-Lettered-At"), raw.time or datetime.now(UTC)),
            "size": (_int(headers.get(ORIGINAL_SIZE)) or len(data)) if truncated else len(data),
            "stored_size": len(data),
            "truncated": truncated,
            "sha256": headers.get(ORIGINAL_SHA256, "") if truncated else hashlib.sha256(data).hexdigest(),
            "utf8": _utf8(data),
            "preview": preview(data, preview_bytes),
        }

    def _detail(self, raw: RawStreamMsg) -> DeadLetterDetail:
        headers = {str(k): str(v) for k, v in (raw.headers or {}).items()}
        return DeadLetterDetail(**self._fields(raw, SHOW_PREVIEW), headers=headers)

    async def _get(self, seq: int) -> RawStreamMsg | None:
        try:
            return await self.nc.jetstream().get_msg(self.stream, seq)
        except NotFoundError:
            return None  # deleted, aged out, or never there

    async def _raw(self, seq: int) -> RawStreamMsg:
        raw = await self._get(seq) if 1 <= seq <= MAX_SEQ else None
        if raw is None:
            raise NotFound(
                f"no dead letter {seq} on {self.stream} (dropped, retried, aged out, or never there: "
                "`noemactl dlq list` shows the ones kept)"
            )
        return raw

    async def list(self, query: DeadLetterQuery) -> DeadLetterPage:
        """Dead letters newest first, filtered by source and storage time, one page at a time."""
        info = await self.nc.jetstream().stream_info(self.stream)
        first, last = int(info.state.first_seq or 0), int(info.state.last_seq or 0)
        top = min(last, query.before - 1) if query.before else last
        subject = self.topology.dead_letter_subject(query.source) if query.source else None
        items: list[DeadLetter] = []
        seq = top
        while seq >= max(first, 1):
            if top - seq >= _SCAN_BUDGET:
                return DeadLetterPage(items=items, next_before=seq + 1)
            chunk = range(seq, max(first, 1, seq - _CHUNK + 1) - 1, -1)
            for raw in await asyncio.gather(*(self._get(s) for s in chunk)):
                if raw is None:
                    continue
                if query.since is not None and raw.time is not None and raw.time < query.since:
                    return DeadLetterPage(items=items, next_before=None)  # older ones only from here
                if subject is not None and raw.subject != subject:
                    continue
                record = DeadLetter(**self._fields(raw, LIST_PREVIEW))
                items.append(record)
                if len(items) == query.limit:
                    more = record.seq > max(first, 1)
                    return DeadLetterPage(items=items, next_before=record.seq if more else None)
            seq = chunk[-1] - 1
        return DeadLetterPage(items=items, next_before=None)

    async def show(self, seq: int) -> DeadLetterDetail:
        """One dead letter, with a longer preview and its headers (:class:`NotFound` if none)."""
        return self._detail(await self._raw(seq))

    async def original(self, seq: int) -> bytes:
        """The bytes stored for one dead letter (only the start of the original when truncated)."""
        return bytes((await self._raw(seq)).data or b"")

    def _action(
        self, record: DeadLetterDetail, action: str, actor: str, reason: str, now: datetime, **extra: str
    ) -> OperatorAction:
        # Derived from the dead letter (its stream, sequence and Nats-Msg-Id): doing it again after
        # a crash publishes the same event, stored once.
        event_id = derive_id(action, self.stream, str(record.seq), record.headers.get("Nats-Msg-Id", ""))
        details = {
            "dead_letter_stream": self.stream,
            "dead_letter_seq": str(record.seq),
            "source": record.source,
            "error": record.reason,
            "original_subject": record.original_subject or "",
            "original_seq": str(record.original_seq or ""),
            "size": str(record.size),
            "sha256": record.sha256,
            **extra,
        }
        return OperatorAction(
            id=event_id,
            workspace=record.workspace or NO_WORKSPACE,
            occurred_at=now,
            correlation_id=event_id,
            actor=actor,
            payload=OperatorActionPayload(
                action=action,  # type: ignore[arg-type]
                target_id=f"{self.stream}:{record.seq}",
                reason=reason,
                # Header text may hold anything a poison message put in its error (NUL, lone
                # surrogates) that the read model could not store: kept escaped, like a preview.
                details={k: _printable(v, 500) for k, v in details.items() if v},
            ),
        )

    async def _deletable(self) -> bool:
        return not (await self.nc.jetstream().stream_info(self.stream)).config.deny_delete

    async def _remove(self, seq: int) -> None:
        try:
            await self.nc.jetstream().delete_msg(self.stream, seq)
        except NotFoundError:
            pass  # already gone (a concurrent drop or retry)
        except APIError as exc:
            # The same code for "no such message" as for "denied": the stream allows deletes (the
            # caller checked), so the dead letter is gone already.
            if exc.err_code != _DELETE_FAILED:
                raise

    async def retry(
        self, seq: int, *, actor: str, reason: str, now: datetime, force: bool = False
    ) -> RetryResult:
        """Re-publish a dead letter's original to its original subject (after a fix), record it, and
        remove the dead letter. Refuses (:class:`Conflict`) a truncated one, one not from the
        observation stream, and, unless ``force``, one that still does not decode as an event (it
        would only come back as a new dead letter)."""
        reason = _reason(reason)
        raw = await self._raw(seq)
        record = self._detail(raw)
        if record.truncated:
            raise Conflict(
                f"dead letter {seq} was stored truncated ({record.stored_size} of {record.size} bytes, "
                f"sha256 {record.sha256}): the whole original is not kept, so it cannot be retried; "
                "have its publisher send it again, then drop this one"
            )
        observations = self.topology.observation_subjects.removesuffix(">")
        # Stored under its partition (NOEMA_PARTITIONS > 1): re-published where it was published.
        subject = record.original_subject and self.topology.published_subject(record.original_subject)
        if not subject or not subject.startswith(observations):
            raise Conflict(
                f"dead letter {seq} came from {subject or 'an unknown subject'}, not from the observation "
                f"stream: only observations are re-published (an event's original is still on "
                f"{self.topology.event_stream}, the source of truth; a copy would be applied twice on "
                "replay). Drop it once the cause is understood"
            )
        if not force:
            _still_refused(seq, bytes(raw.data or b""))
        msg_id = derive_id("dlq-retry", self.stream, str(seq), record.headers.get("Nats-Msg-Id", ""))
        # Its trace context goes with it: the retried observation's memory continues the trace.
        headers = carried(record.headers) | {
            "Nats-Msg-Id": msg_id,
            "Nats-Expected-Stream": self.topology.observation_stream,
        }
        try:
            ack = await self.nc.jetstream().publish(subject, bytes(raw.data or b""), headers=headers)
        except APIError as exc:
            if exc.err_code == _WRONG_STREAM:
                raise OperationError(
                    f"{subject} is not stored on {self.topology.observation_stream}"
                ) from None
            raise
        action = self._action(
            record,
            "dlq_retry",
            actor,
            reason,
            now,
            retried_to=subject,
            retried_seq=str(ack.seq),
            retried_msg_id=msg_id,
        )
        await self.publisher.publish([action])
        removed = await self._deletable()
        if removed:
            await self._remove(seq)
        return RetryResult(
            seq=seq,
            subject=subject,
            stream=ack.stream,
            stream_seq=int(ack.seq),
            duplicate=bool(ack.duplicate),
            msg_id=msg_id,
            action_event_id=action.id,
            removed=removed,
        )

    async def drop(self, seq: int, *, actor: str, reason: str, now: datetime) -> DropResult:
        """Delete a dead letter for good, first recording who did it, when and why."""
        reason = _reason(reason)
        if not await self._deletable():
            raise Conflict(
                f"{self.stream} was created before dead letters could be dropped (deny_delete, which "
                "JetStream cannot lift): run `noemactl dlq upgrade` once to recreate it with its dead "
                "letters; until then they leave only by age (NOEMA_DLQ_MAX_AGE) or size "
                "(NOEMA_DLQ_MAX_BYTES)"
            )
        record = await self.show(seq)
        action = self._action(record, "dlq_drop", actor, reason, now)
        await self.publisher.publish([action])
        await self._remove(seq)
        return DropResult(seq=seq, action_event_id=action.id)


def _still_refused(seq: int, original: bytes) -> None:
    """Raise :class:`Conflict` when ``original`` is not an event this code can read: re-published,
    it would go straight back to the dead letters."""
    try:
        decode_event(original)
    except EventDecodeError as exc:
        raise Conflict(
            f"dead letter {seq} is still not a valid event ({exc}): re-published, it would come back "
            "as a new dead letter. Have its publisher send it corrected and drop this one, or retry "
            "with force (--force) if the worker that refused it now accepts it"
        ) from None
