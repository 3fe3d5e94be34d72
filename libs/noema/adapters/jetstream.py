"""JetStream adapter: connection, idempotent stream setup, publishing events, reading the stream."""

from __future__ import annotations

import asyncio
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlsplit

import nats
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    KeyValueConfig,
    PubAck,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    SubjectTransform,
)
from nats.js.errors import APIError, NotFoundError

from noema.adapters import tracing
from noema.adapters.dlq_policy import DEFAULT_KEEP_BYTES, DeadLetterPolicy, kept_original
from noema.adapters.dlq_upgrade import MOVE_SUFFIX
from noema.adapters.liveness import track
from noema.adapters.nats_auth import NatsAuth
from noema.adapters.published import note_published
from noema.adapters.pull import Puller
from noema.adapters.vector_cache import vector_stream_config
from noema.ports import ConcurrentWrite, Sealer
from noema.topology import MAX_ATOMIC_BATCH, Topology
from noema_events import Event, decode_event, encode_event
from noema_events.bounded import decode_json
from noema_sdk.protocol import inbox_prefix
from noema_sdk.tracing import carried

if TYPE_CHECKING:  # prometheus_client: loaded by the processes that keep metrics, not by a command
    from noema.adapters.metrics import Metrics

E = TypeVar("E", bound=Event)

__all__ = [
    "EPHEMERAL_IDLE_S",
    "FAILED",
    "INVALID",
    "MAX_ATOMIC_BATCH",
    "ConcurrentWrite",
    "DeadLetters",
    "EventPublisher",
    "Outgoing",
    "auth_options",
    "connect",
    "connect_within",
    "dead_letter",
    "dead_letter_stream_config",
    "ensure_streams",
    "last_on_subject",
    "last_seq_at",
    "msg_id_header",
    "nats_servers",
    "publish_batch",
    "publish_each",
    "publish_expecting",
    "read_stream",
    "stream_last_seq",
]

log = structlog.get_logger("noema.jetstream")


def msg_id_header(message_id: str) -> dict[str, str]:
    """The header that makes JetStream store a retried publish once."""
    return {"Nats-Msg-Id": message_id}


RECONNECT_WAIT_S = 1.0
"""Pause between two reconnect attempts to the same server."""


def auth_options(url: str, auth: NatsAuth | None) -> dict[str, object]:
    """``nats.connect`` options for ``auth``: credentials, TLS, and the identity's own reply inbox
    (the server lets each identity subscribe below its own prefix only)."""
    auth = auth or NatsAuth()
    options: dict[str, object] = {}
    first = urlsplit(nats_servers(url)[0])
    user = auth.user or first.username
    if auth.user and auth.password:
        options["user"] = auth.user
        options["password"] = auth.password
    elif first.username and first.password:
        # Credentials in the URL: given as options too, so that they also sign in to the servers
        # of a cluster the client learns of from the server (those come without credentials).
        options["user"] = unquote(first.username)
        options["password"] = unquote(first.password)
    if auth.creds:
        options["user_credentials"] = str(auth.creds)
    if user:
        options["inbox_prefix"] = inbox_prefix(unquote(user))
    if auth.tls_ca or auth.tls_cert or url.startswith("tls://"):
        context = ssl.create_default_context(cafile=str(auth.tls_ca) if auth.tls_ca else None)
        if auth.tls_cert and auth.tls_key:
            context.load_cert_chain(str(auth.tls_cert), str(auth.tls_key))
        options["tls"] = context
    return options


def nats_servers(url: str) -> list[str]:
    """The servers of ``url``: one URL, or a comma-separated list of a cluster's servers
    (``nats://a:4222,nats://b:4222``, the form ``NOEMA_NATS_URL`` takes). The client connects to
    one of them and, when it goes away, reconnects to another."""
    servers = [one.strip() for one in url.split(",") if one.strip()]
    if not servers:
        raise ValueError("no NATS server URL given")
    return servers


async def _log_error(exc: Exception) -> None:
    # nats-py reports a permissions violation here only (the refused request then times out):
    # say which subject was refused, so a missing grant is found from the log.
    log.error("nats error", error=str(exc))


async def connect(url: str, name: str, *, auth: NatsAuth | None = None, **kwargs: object) -> NATS:
    """Connect to NATS as ``auth`` (or as the credentials in ``url``). The first connect gives up
    after a few attempts (a wrong URL fails in seconds); once connected, the client reconnects
    forever, so a NATS restart of any length never leaves a process alive without a connection (see
    :mod:`noema.adapters.liveness`).

    ``url`` may list several servers of one cluster, comma-separated (:func:`nats_servers`): the
    first connect tries each, and a lost server is replaced by any other that answers (besides
    those listed, the client learns the cluster's other servers from the one it is connected to).
    """
    options: dict[str, object] = {
        "connect_timeout": 5,
        "allow_reconnect": True,
        "max_reconnect_attempts": 10,
        "reconnect_time_wait": RECONNECT_WAIT_S,
        "error_cb": _log_error,
        **auth_options(url, auth),
        **kwargs,  # the caller's choice wins
    }
    nc = await nats.connect(nats_servers(url), name=name, **options)
    if "max_reconnect_attempts" not in kwargs:
        # nats-py reads this option on every reconnect attempt; -1 is its documented "never stop".
        nc.options["max_reconnect_attempts"] = -1
    return track(nc)


async def connect_within(url: str, name: str, seconds: float, *, auth: NatsAuth | None = None) -> NATS:
    """Connect as :func:`connect` does, giving up after ``seconds`` (``TimeoutError``). Each server
    listed gets its share of them: one that takes the connection but never answers (a stopped
    process, a port held by another) leaves the others time to be tried."""
    share = seconds / len(nats_servers(url))
    return await asyncio.wait_for(connect(url, name, auth=auth, connect_timeout=share), seconds)


def _stream_configs(
    topology: Topology,
    duplicate_window_s: float,
    replicas: int = 1,
    dead_letters: DeadLetterPolicy = DeadLetterPolicy(),  # frozen: a shared default is safe
) -> list[StreamConfig]:
    base = StreamConfig(
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        max_age=0,  # retained indefinitely: the stream is the source of truth
        max_msgs=-1,
        max_bytes=-1,
        discard=DiscardPolicy.OLD,
        duplicate_window=duplicate_window_s,
        deny_delete=True,
        deny_purge=True,
        # Atomic batch publish (NATS 2.12+): a cycle's events are stored all-or-nothing, with one
        # fsync per batch instead of one per message (see publish_batch).
        allow_atomic=True,
        # On a cluster, each stream kept on that many servers (its consumers follow the stream).
        num_replicas=replicas,
    )
    return [
        replace(
            base,
            name=topology.observation_stream,
            subjects=[topology.observation_subjects],
            description="Noema observations",
            # Partitions by workspace (P > 1): the stream stores each observation under its
            # workspace's partition, which NATS computes (Topology.observation_transform).
            subject_transform=_transform(topology.observation_transform),
            # Not the source of truth (the events are): an erasure (docs/privacy.md) deletes the
            # observations of what it erases, overwriting them on disk; only the operator may.
            deny_delete=False,
        ),
        replace(
            base,
            name=topology.event_stream,
            subjects=[topology.event_subjects],
            description="Noema events: every state change",
        ),
        replace(
            base,
            name=topology.dead_letter_stream,
            subjects=[topology.dead_letter_subjects],
            description="Rejected messages with the reason",
            # Not the source of truth (see dlq_policy): kept for a while, bounded, and an operator
            # may delete one (`noemactl dlq drop`); purging the whole stream stays forbidden.
            max_age=dead_letters.max_age_s,
            max_bytes=dead_letters.stream_max_bytes,
            deny_delete=False,
        ),
    ]


async def _upgrading(js: JetStreamContext, name: str) -> bool:
    """Whether ``noemactl dlq upgrade`` is moving this stream's dead letters (see dlq_upgrade)."""
    try:
        await js.stream_info(name + MOVE_SUFFIX)
    except NotFoundError:
        return False
    return True


def dead_letter_stream_config(
    topology: Topology,
    duplicate_window_s: float = 7200.0,
    replicas: int = 1,
    dead_letters: DeadLetterPolicy = DeadLetterPolicy(),  # frozen: a shared default is safe
) -> StreamConfig:
    """The dead-letter stream's configuration, as :func:`ensure_streams` creates it."""
    return _stream_configs(topology, duplicate_window_s, replicas, dead_letters)[-1]


async def ensure_streams(
    js: JetStreamContext,
    topology: Topology,
    duplicate_window_s: float = 7200.0,
    replicas: int = 1,
    dead_letters: DeadLetterPolicy = DeadLetterPolicy(),  # frozen: a shared default is safe
) -> None:
    """Create the observation, event and dead-letter streams (and the vector cache's and the
    heartbeats'), or update them to this config.

    ``replicas`` and the dead-letter limits are applied to existing streams too, so every process
    must be given the same values (``NOEMA_STREAM_REPLICAS``, ``NOEMA_DLQ_MAX_AGE``/``_MAX_BYTES``:
    :attr:`noema.runtime.settings.Settings.dead_letter_policy`); more than 1 replica needs a JetStream
    cluster.
    A dead-letter stream created before single deletes were allowed keeps refusing them (JetStream
    cannot lift ``deny_delete`` on an existing stream) until ``noemactl dlq upgrade`` recreates it;
    while that runs (its ``_MOVE`` stream exists) the dead-letter stream is left alone.
    """
    configs = _stream_configs(topology, duplicate_window_s, replicas, dead_letters)
    for config in [*configs, vector_stream_config(topology, replicas)]:
        if config.name == topology.dead_letter_stream and await _upgrading(js, config.name):
            log.info("dead-letter stream being made deletable; left as it is", stream=config.name)
            continue
        try:
            info = await js.stream_info(config.name)  # type: ignore[arg-type]
        except NotFoundError:
            try:
                await _write_stream(js.add_stream, config, "create")
            except RuntimeError as exc:
                if config.name != topology.vector_stream:
                    raise
                # The vector cache is memory only: a NATS restart empties it of its stream, which
                # only the operator may create again (`up` does after a restart). Not a source of
                # truth — every worker works without it, computing what it would have found.
                log.warning("vector cache stream missing; working without it", error=str(exc))
                continue
            log.info("stream created", stream=config.name)
        else:
            if info.config.deny_delete and not config.deny_delete:
                config = replace(config, deny_delete=True)  # cannot be lifted (see above)
            if _differs(info.config, config):
                await _write_stream(js.update_stream, config, "update")
    await _ensure_health_bucket(js, topology, replicas)


HEALTH_TTL_S = 3600.0
"""A heartbeat key nobody rewrote for this long (a process that vanished) is forgotten."""


async def _ensure_health_bucket(js: JetStreamContext, topology: Topology, replicas: int) -> None:
    # Heartbeats (noema.runtime.health): one key per process, only the latest value kept; file storage so
    # that a NATS restart does not lose the bucket every process writes to.
    try:
        await js.stream_info(topology.health_stream)
    except NotFoundError:
        await js.create_key_value(
            KeyValueConfig(
                bucket=topology.health_bucket,
                description="Noema heartbeats: one key per process",
                history=1,
                ttl=HEALTH_TTL_S,
                replicas=replicas,
                storage=StorageType.FILE,
            )
        )
        log.info("stream created", stream=topology.health_stream)


def _transform(source_and_destination: tuple[str, str] | None) -> SubjectTransform | None:
    if source_and_destination is None:
        return None
    src, dest = source_and_destination
    return SubjectTransform(src=src, dest=dest)


def _differs(current: StreamConfig, wanted: StreamConfig) -> bool:
    # Only what Noema sets: the server fills in (and reports) much more. A transform Noema no
    # longer wants (partitions back to 1) is unset too.
    have, want = current.as_dict(), wanted.as_dict()
    return any(have.get(key) != value for key, value in want.items()) or (
        "subject_transform" in have and "subject_transform" not in want
    )


async def _write_stream(
    write: Callable[[StreamConfig], Awaitable[object]], config: StreamConfig, verb: str
) -> None:
    # Only the operator identity may create or update streams (noema.runtime.identities); a worker that
    # finds a stream missing or outdated cannot fix it, and its request is refused (times out).
    try:
        await write(config)
    except TimeoutError:
        raise RuntimeError(
            f"could not {verb} stream {config.name}: no answer from JetStream. Only the operator "
            "identity may create or update streams: run `noemactl up` (embedded) or `noemactl prepare` "
            "(external servers) first, with the operator's credentials"
        ) from None


async def stream_last_seq(js: JetStreamContext, stream: str) -> int:
    """The sequence of the newest message in a stream (0 when empty)."""
    info = await js.stream_info(stream)
    return int(info.state.last_seq)


async def credentials_accepted(url: str, user: str, password: str, seconds: float = 10.0) -> bool:
    """Whether the NATS server at ``url`` takes ``user``'s ``password`` within ``seconds``, asking
    again until it does (a server reloads its configuration asynchronously)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            nc = await nats.connect(
                url.split(","),
                user=user,
                password=password,
                inbox_prefix=inbox_prefix(user),
                allow_reconnect=False,
                connect_timeout=2,
                error_cb=_quiet,
            )
        except (nats.errors.Error, OSError, TimeoutError):
            await asyncio.sleep(0.1)
            continue
        await nc.close()
        return True
    return False


async def _quiet(_: Exception) -> None:
    return None


async def stream_last_seq_within(nc: NATS, stream: str, seconds: float) -> int | None:
    """:func:`stream_last_seq`, or None when it cannot be known within ``seconds`` (NATS not
    connected, the stream missing, an error or no answer): for a status that reports what it sees."""
    if not nc.is_connected:
        return None
    try:
        return await asyncio.wait_for(stream_last_seq(nc.jetstream(), stream), seconds)
    except (NotFoundError, nats.errors.Error, TimeoutError):
        return None


async def first_seq_on(js: JetStreamContext, stream: str, subjects: str) -> int | None:
    """The sequence of the oldest message ``stream`` holds on ``subjects`` (None when none)."""
    try:
        msg = await js.get_msg(stream, seq=1, subject=subjects, next=True)
    except NotFoundError:
        return None
    return int(msg.seq or 0) or None


async def last_seq_at(js: JetStreamContext, stream: str, subjects: str, when: datetime) -> int:
    """The sequence of the last message on ``subjects`` that ``stream`` stored at or before ``when``
    (0 when none), by the stream's own clock: the time JetStream stored each message, which never
    goes back as sequences go up (unlike the events' ``occurred_at``, each from its producer's
    clock). Stream times are compared to the microsecond. A binary search, a message read per step.
    """
    info = await js.stream_info(stream)
    low, high = int(info.state.first_seq) - 1, int(info.state.last_seq)
    # The answer is in [low, high]: low is 0 or a message stored at or before `when`.
    while low < high:
        middle = (low + high + 1) // 2
        try:  # the first message on the subjects from `middle` on (gaps are possible)
            msg = await js.get_msg(stream, seq=middle, subject=subjects, next=True)
            seq, stored = int(msg.seq or 0), msg.time
        except NotFoundError:
            seq, stored = high + 1, None
        if seq <= high and stored is not None and stored <= when:
            low = seq
        else:
            high = middle - 1
    return low


INVALID = "invalid"
"""Dead-letter kind: the message can never be processed (undecodable, wrong subject, refused by the
database). Fix the publisher; retrying the same bytes fails the same way."""
FAILED = "failed"
"""Dead-letter kind: a valid-looking message whose handling kept failing (an exception in Noema's
own code, retried first). Most likely a bug: fix it, then ``noemactl dlq retry``."""


async def dead_letter(
    js: JetStreamContext,
    topology: Topology,
    source: str,
    msg: Msg,
    reason: str,
    kind: str = INVALID,
    keep_bytes: int = DEFAULT_KEEP_BYTES,
) -> None:
    """Keep a message that ``source`` rejected, with why, on the dead-letter stream (stored once).

    The id is derived from the source and the original's stream position, so writing the same dead
    letter twice (a crash between writing it and acking the original) stores it once. An original
    bigger than ``keep_bytes`` is stored truncated (see :func:`~.dlq_policy.kept_original`).
    """
    meta = msg.metadata
    seq = meta.sequence.stream
    data, truncation = kept_original(msg.data, keep_bytes)
    await js.publish(
        topology.dead_letter_subject(source),
        data,
        headers={
            "Nats-Msg-Id": f"{source}-dlq-{meta.stream}-{seq}",
            "Noema-Error": reason[:1000],
            "Noema-Error-Kind": kind,
            "Noema-Source": source,
            "Noema-Original-Subject": msg.subject,
            "Noema-Original-Stream": str(meta.stream),
            "Noema-Original-Seq": str(seq),
            "Noema-Deliveries": str(meta.num_delivered),
            "Noema-Dead-Lettered-At": datetime.now(UTC).isoformat(timespec="milliseconds"),
        }
        | truncation
        | carried(msg.headers),  # its trace context (valid only), shown by `dlq show`
    )


class DeadLetters:
    """Rejects messages for one worker (``source``): a dead letter with the reason, then the ack."""

    def __init__(
        self, js: JetStreamContext, topology: Topology, source: str, metrics: Metrics | None = None
    ) -> None:
        self._js = js
        self._topology = topology
        self.source = source
        self._metrics = metrics

    async def write(self, msg: Msg, reason: str, kind: str = INVALID) -> None:
        """Store the dead letter only (the caller acks, e.g. after committing its own skip)."""
        await dead_letter(self._js, self._topology, self.source, msg, reason, kind)
        if self._metrics is not None:
            self._metrics.dead_lettered.labels(self.source, kind).inc()
        log.warning(
            "message dead-lettered",
            source=self.source,
            kind=kind,
            seq=msg.metadata.sequence.stream,
            subject=msg.subject,
            reason=reason[:300],
        )

    async def reject(self, msg: Msg, reason: str, kind: str = INVALID) -> None:
        """Dead-letter ``msg`` and ack it: it is never handed out again."""
        await self.write(msg, reason, kind)
        await msg.ack()


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to publish: subject, bytes, its ``Nats-Msg-Id`` and other headers (the trace
    context it carries on, :mod:`noema.adapters.tracing`); with ``expected_last``, a fence: stored
    only if the subject's last stream sequence is still that (0: no message yet)."""

    subject: str
    data: bytes
    msg_id: str
    headers: Mapping[str, str] = field(default_factory=dict)
    expected_last: int | None = None

    def all_headers(self, **more: str) -> dict[str, str]:
        """Its headers with ``Nats-Msg-Id``, the fence when there is one, and ``more`` (which win
        over the carried ones)."""
        fence = {} if self.expected_last is None else {EXPECTED_LAST_SUBJECT_SEQ: str(self.expected_last)}
        return {**self.headers, "Nats-Msg-Id": self.msg_id, **fence, **more}


EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"

WRONG_LAST_SEQUENCE = 10071
"""JetStream's error code when ``Nats-Expected-Last-Subject-Sequence`` does not hold."""


async def publish_each(js: JetStreamContext, messages: Sequence[Outgoing]) -> int:
    """Publish pipelined, one ack per message; JetStream drops duplicates by ``Nats-Msg-Id``.

    Returns the highest stream sequence acknowledged (a duplicate's is the stored original's).
    """
    return max(await _stored_each(js, messages), default=0)


async def _stored_each(js: JetStreamContext, messages: Sequence[Outgoing]) -> list[int]:
    """Each message's stream sequence, published one by one, pipelined. A fenced message is
    awaited before anything after it is sent: when its fence does not hold (:class:`ConcurrentWrite`)
    nothing after it is stored. (The server checks a fence before the duplicate window, so a retried
    fenced message whose subject moved is refused too, not acknowledged as a duplicate.)"""
    seqs: list[int] = []
    pending: list[Awaitable[PubAck]] = []
    try:
        for m in messages:
            if m.expected_last is not None:
                seqs += [int(a.seq) for a in await asyncio.gather(*pending)]
                pending = []
                seqs.append(int((await js.publish(m.subject, m.data, headers=m.all_headers())).seq))
            else:
                pending.append(await js.publish_async(m.subject, m.data, headers=m.all_headers()))
        seqs += [int(a.seq) for a in await asyncio.gather(*pending)]
    except APIError as exc:
        if exc.err_code == WRONG_LAST_SEQUENCE:
            raise ConcurrentWrite(str(exc.description)) from exc
        raise
    return seqs


async def publish_batch(
    nc: NATS, js: JetStreamContext, messages: Sequence[Outgoing], timeout: float = 10.0
) -> int:
    """Store ``messages`` all-or-nothing, in order, as atomic batches of at most 1000.

    Returns the highest stream sequence stored; see :func:`store_batch`.
    """
    return max(await store_batch(nc, js, messages, timeout), default=0)


async def store_batch(
    nc: NATS, js: JetStreamContext, messages: Sequence[Outgoing], timeout: float = 10.0
) -> list[int]:
    """Store ``messages`` all-or-nothing, in order, as atomic batches of at most 1000; returns each
    message's stream sequence.

    An atomic batch that contains an already-stored message id is refused whole by the server
    (that happens only when a crashed worker's input is redelivered); it is then published message
    by message, so the duplicates are dropped and the rest stored. Streams without atomic publish
    (older servers) take the same per-message path. A batch with a fence that does not hold
    (:attr:`Outgoing.expected_last`) is refused whole: :class:`ConcurrentWrite`, nothing stored.
    """
    seqs: list[int] = []
    for start in range(0, len(messages), MAX_ATOMIC_BATCH):
        chunk = messages[start : start + MAX_ATOMIC_BATCH]
        if len(chunk) == 1:
            seqs += await _stored_each(js, chunk)
            continue
        batch_id = uuid.uuid4().hex
        for i, m in enumerate(chunk[:-1], start=1):
            await nc.publish(
                m.subject,
                m.data,
                headers=m.all_headers(**{"Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(i)}),
            )
        last = chunk[-1]
        reply = await nc.request(
            last.subject,
            last.data,
            timeout=timeout,
            headers=last.all_headers(
                **{
                    "Nats-Batch-Id": batch_id,
                    "Nats-Batch-Sequence": str(len(chunk)),
                    "Nats-Batch-Commit": "1",
                }
            ),
        )
        answer = decode_json(reply.data, dict[str, Any], what="the batch's reply")
        error = answer.get("error")
        if error and error.get("err_code") == WRONG_LAST_SEQUENCE:
            raise ConcurrentWrite(str(error.get("description")))
        if error:
            log.info("atomic batch refused; publishing one by one", reason=error.get("description"))
            seqs += await _stored_each(js, chunk)
        else:
            # An atomic batch is stored contiguously, its last message at the sequence answered.
            end = int(answer.get("seq", 0))
            seqs += range(end - len(chunk) + 1, end + 1)
    return seqs


class EventPublisher:
    """Publishes events on their subjects with ``Nats-Msg-Id`` = event id, as atomic batches; with
    optimistic concurrency on one subject (:class:`noema.ports.ExpectingSink`) one at a time."""

    def __init__(self, nc: NATS, topology: Topology, sealer: Sealer | None = None) -> None:
        self._nc = nc
        self._js = nc.jetstream(publish_async_max_pending=MAX_ATOMIC_BATCH * 2)
        self._topology = topology
        self._sealer = sealer
        """Seals content before it is published (:mod:`noema.domain.sealed_events`); every process
        with a database has one. Without it (the in-memory tier's tests) content goes as it is."""

    async def sealed(self, events: Sequence[Event]) -> Sequence[Event]:
        """``events`` as they are published: content sealed under its items' keys."""
        return events if self._sealer is None else await self._sealer.seal(events)

    async def opened(self, events: Sequence[E]) -> list[E]:
        """``events`` read back with their sealed content opened (erased content empty)."""
        return list(events) if self._sealer is None else await self._sealer.open(events)

    async def publish(self, events: Sequence[Event]) -> int:
        """Publish and wait until JetStream stored every event (duplicates are stored once);
        returns the highest stream sequence stored (also noted for :mod:`noema.adapters.published`)."""
        return max(await self.publish_fenced(events, {}), default=0)

    async def publish_fenced(self, events: Sequence[Event], fences: Mapping[str, int]) -> list[int]:
        """Publish as :meth:`publish` does, but each event whose id ``fences`` names is stored only
        if its subject's last stream sequence is still the one given (0: none yet): when one does not
        hold, nothing of that atomic batch is stored and :class:`ConcurrentWrite` is raised. Returns
        each event's stream sequence, in order."""
        events = await self.sealed(events)
        seqs = await store_batch(
            self._nc,
            self._js,
            [
                Outgoing(
                    self._topology.event_subject(ev),
                    encode_event(ev),
                    ev.id,
                    tracing.outgoing(ev),
                    expected_last=fences.get(ev.id),
                )
                for ev in events
            ],
        )
        note_published(max(seqs, default=0))
        return seqs

    async def last_on_subject(self, like: Event) -> tuple[int, Event] | None:
        """The sequence and the event last stored on ``like``'s subject (None when there is none)."""
        subject = self._topology.event_subject(like)
        last = await last_on_subject(self._js, self._topology.event_stream, subject)
        if last is None:
            return None
        event = decode_event(last[1])
        if self._sealer is not None:
            (event,) = await self._sealer.open([event])
        return last[0], event

    async def publish_expecting(self, event: Event, expected_last: int) -> int:
        """Publish ``event`` only if its subject's last sequence is still ``expected_last`` (0: no
        message yet); raises :class:`ConcurrentWrite` when another writer got there first."""
        (event,) = await self.sealed([event])
        return await publish_expecting(self._js, event, self._topology, expected_last)


async def last_on_subject(js: JetStreamContext, stream: str, subject: str) -> tuple[int, bytes] | None:
    """The stream sequence and data of the last message on ``subject`` (None when there is none)."""
    try:
        msg = await js.get_last_msg(stream, subject)
    except NotFoundError:
        return None
    return int(msg.seq or 0), bytes(msg.data or b"")


async def publish_expecting(
    js: JetStreamContext, event: Event, topology: Topology, expected_last_subject_seq: int
) -> int:
    """Publish ``event`` only if its subject's last sequence is still the one read (0: no message yet).

    Raises :class:`ConcurrentWrite` when another writer got there first; the caller re-reads and retries.
    """
    outgoing = Outgoing(
        topology.event_subject(event),
        encode_event(event),
        event.id,
        tracing.outgoing(event),
        expected_last=expected_last_subject_seq,
    )
    (seq,) = await _stored_each(js, [outgoing])
    note_published(seq)
    return seq


EPHEMERAL_IDLE_S = 60.0
"""How long an ephemeral reading consumer (:func:`read_stream`, the erasure's scan) outlives its last
pull before the server removes it: longer than a reader's pause between two batches."""


async def read_stream(
    nc: NATS, stream: str, subjects: str, start_seq: int, end_seq: int, batch: int = 1000
) -> AsyncIterator[list[Msg]]:
    """Yield the messages of ``stream`` from ``start_seq`` to ``end_seq`` in order, in batches of
    ``batch`` (the last one shorter): a reader such as replay then applies full batches, whatever
    sizes the server delivers them in.

    Uses an ephemeral pull consumer with no acks: reading never changes any durable state. It is
    not deleted after (the API's identity may not delete consumers, noema.runtime.identities): the
    server removes it once idle for :data:`EPHEMERAL_IDLE_S`.
    """
    if end_seq < start_seq:
        return
    js = nc.jetstream()
    info = await js.add_consumer(
        stream,
        ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=start_seq,
            ack_policy=AckPolicy.NONE,
            filter_subject=subjects,
            inactive_threshold=EPHEMERAL_IDLE_S,
        ),
    )
    assert info.name is not None
    puller = await Puller(nc, stream, info.name, batch).start()
    try:
        seen = start_seq - 1
        pending: list[Msg] = []
        while seen < end_seq:
            msgs = await puller.fetch(timeout=10.0)
            if not msgs:
                raise RuntimeError(f"stream {stream} stopped delivering at seq {seen} (wanted {end_seq})")
            pending += [m for m in msgs if m.metadata.sequence.stream <= end_seq]
            if pending:
                seen = pending[-1].metadata.sequence.stream
            while len(pending) >= batch:
                yield pending[:batch]
                pending = pending[batch:]
            if pending and seen >= end_seq:
                yield pending
    finally:
        await puller.stop()
