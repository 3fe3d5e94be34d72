"""The application layer every surface calls: the CLI, the HTTP API, the MCP server and the NATS
service hold one :class:`Noema` and call its methods, so none re-implements logic.

It composes the operations over the ports it is given: recall (search), the dispatch preamble,
observations, knowledge (facts, policies, grants, notes, hot tier, maintenance), access control, the
operators' reads (listing, timeline, memory detail, audit log, why, audit diff) and writes. Agents'
reads honour their grants in strict mode; writes go through events. What connects to the servers and
builds the adapters is the composition root's (:mod:`noema.composition.instance`), with the
operations that drive the servers themselves (erasure, replay, the as-of states).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import msgspec

from noema.application import curation, upkeep
from noema.application.access import Caller, InsufficientMemoryPermission
from noema.application.audit_views import AuditDiff, DiffQuery, Why
from noema.application.changes import audit_diff
from noema.application.curation import KnowledgeEntry, OperatorReceipt, SubjectLinks, create_memory
from noema.application.knowledge import Knowledge
from noema.application.lineage import why
from noema.application.memory_reads import MemoryReader, SearchOptions
from noema.application.preamble import Preamble, build_preamble
from noema.application.reads import (
    audit,
    memory_detail,
    resolve_memory,
)
from noema.application.views import AuditPage, AuditQuery, MemoryDetail
from noema.domain.knowledge import DomainRef
from noema.errors import InvalidQuery, OperationError, Unavailable
from noema.observations import Stored, build_observation
from noema.ports import (
    Embedder,
    ExpectingSink,
    MemoryReads,
    ObservationSink,
    PastPoint,
    RecallVoices,
    SearchTimer,
)
from noema.stream_points import StreamPoint
from noema_events import Event, ObservationRecorded

__all__ = [
    "Caller",
    "InsufficientMemoryPermission",
    "InvalidQuery",
    "Noema",
    "OperationError",
    "SearchOptions",
    "StatusAction",
]

StatusAction = Literal["retract", "archive", "restore"]
"""The status changes an operator makes to a memory."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Noema(MemoryReader):
    """What Noema does, as every surface calls it: the operations over the ports it is given (the
    composition root, :class:`noema.composition.instance.Instance`, builds them)."""

    def __init__(
        self,
        *,
        publisher: ExpectingSink,
        memories: MemoryReads,
        knowledge: Knowledge,
        voices: RecallVoices,
        observations: ObservationSink,
        embedder: Callable[[], Awaitable[Embedder | None]],
        connected: Callable[[], bool],
        decay_interval_s: float,
        clock: Callable[[], datetime] = _utcnow,
        point: PastPoint | None = None,
        as_of: Callable[[StreamPoint], Awaitable[Noema]] | None = None,
        metrics: SearchTimer | None = None,
        subjects: SubjectLinks | None = None,
    ) -> None:
        super().__init__(
            memories=memories,
            voices=voices,
            access=knowledge.access_control,
            embedder=embedder,
            clock=clock,
            metrics=metrics,
        )
        self.publisher = publisher
        """Where every write goes (:meth:`writer`)."""
        self.knowledge = knowledge
        self.point = point
        """For a view as of a past point (:meth:`as_of`): the point it reads; None: the present."""
        self._observations = observations
        self._connected = connected
        self._decay_interval_s = decay_interval_s
        self._as_of = as_of
        self._subjects = subjects
        """Which subjects a memory's content is about (the keyring's links): a correction carries them."""

    async def as_of(self, point: StreamPoint) -> Noema:
        """A read-only view of the state as of ``point``, on which every read of this class answers
        what it answered then (:mod:`noema.composition.asof`); its :attr:`point` says which sequence
        and time it reflects."""
        if self._as_of is None:
            raise OperationError("this instance reads the present only")
        return await self._as_of(point)

    async def preamble(self, caller: Caller, task: str, repo: str | None = None) -> Preamble:
        """The dispatch preamble for the calling agent (honouring its grants in strict mode)."""
        return await build_preamble(
            self.knowledge.reads,
            caller.workspace,
            caller.agent,
            task,
            repo,
            await self.access.readable_domains(caller),
            at=self.clock(),
        )

    async def observe(self, caller: Caller, content: str, **fields: Any) -> dict[str, Any]:
        """Publish an observation of the caller's mind (its actor the caller's); returns its id, stream
        sequence and whether the id was already stored (a retry: not stored again). ``fields`` are
        those of :func:`~noema.client.build_observation` (a bad value is an OperationError)."""
        try:
            obs = build_observation(
                content, workspace=caller.workspace, mind=caller.agent, actor=caller.actor, **fields
            )
        except ValueError as exc:
            raise OperationError(str(exc)) from None
        stored = await self._observations.send(obs)
        return {"observation_id": obs.id, "seq": stored.seq, "duplicate": stored.duplicate}

    async def memory(self, id_or_prefix: str, workspace: str | None = None) -> MemoryDetail:
        """Operators: one memory (in ``workspace`` when given) with provenance, relationships,
        vectors and the events citing it (:class:`~noema.errors.NotFound` when there is none)."""
        return await memory_detail(self.memories, id_or_prefix, workspace)

    async def enter_knowledge(self, operator: str, entry: KnowledgeEntry, reason: str) -> OperatorReceipt:
        """Operators: enter a memory on the operator channel, its domain created on first use (as a
        fact's is) and stored in its canonical form (:class:`OperationError` for a bad name)."""
        caller = Caller(entry.workspace, operator, "operator", operator=True)
        domain_events: list[Event] = []
        if entry.domain is not None:
            try:
                ref = DomainRef.parse(entry.domain, entry.repo)
            except ValueError as exc:
                raise OperationError(str(exc)) from None
            domain_events = await self.knowledge.domain_events(caller, ref)
            entry = msgspec.structs.replace(entry, domain=ref.key, repo=ref.repo)
        return await create_memory(
            self.publisher,
            entry,
            actor=caller.actor,
            reason=reason,
            now=self.clock(),
            domain_events=domain_events,
        )

    async def resolve_memory(self, id_or_prefix: str, workspace: str | None = None) -> str:
        """The full id a memory id or unique prefix names (in ``workspace`` when given)."""
        return await resolve_memory(self.memories, id_or_prefix, workspace)

    async def audit(self, query: AuditQuery) -> AuditPage:
        """Operators: the audit log, newest first (an unknown event type is an InvalidQuery)."""
        return await audit(self.memories, query)

    async def why(self, ref: str, workspace: str | None = None, limit: int = 500) -> Why:
        """Operators: the chain of events behind an event, memory, fact, policy or observation id
        (in ``workspace`` when given, else the one that has it), through causation and correlation
        ids (:func:`noema.application.lineage.why`; NotFound when nothing names it)."""
        return await why(self.memories, ref, workspace, limit)

    async def audit_diff(self, query: DiffQuery) -> AuditDiff:
        """Operators: what changed between two points of the stream, with the events responsible
        (:func:`noema.application.changes.audit_diff`; a point it cannot read is an InvalidQuery)."""
        return await audit_diff(self.memories, query)

    def writer(self) -> ExpectingSink:
        """The publisher every write goes through; while NATS is not connected a write is
        :class:`~noema.errors.Unavailable` (instead of hanging until the client gives up)."""
        if self.point is not None:
            raise OperationError(f"the state as of seq {self.point.seq} is read-only: write without as_of")
        if not self._connected():
            raise Unavailable("not connected to NATS; writes are unavailable (retry later)")
        return self.publisher

    async def publish_observation(self, obs: ObservationRecorded) -> Stored:
        """Operators: publish a built observation as is (its actor and mind are the caller's own)."""
        self.writer()
        return await self._observations.send(obs)

    async def change_status(
        self, action: StatusAction, memory_id: str, *, actor: str, reason: str
    ) -> OperatorReceipt:
        """Operators: retract (mark inaccurate), archive or restore a memory, with the reason."""
        change = {"retract": curation.retract, "archive": curation.archive, "restore": curation.restore}
        return await change[action](
            self.memories, self.writer(), memory_id, actor=actor, reason=reason, now=self.clock()
        )

    async def correct(self, memory_id: str, content: str, *, actor: str, reason: str) -> OperatorReceipt:
        """Operators: supersede a memory by a copy with corrected content."""
        return await curation.correct(
            self.memories,
            self.writer(),
            memory_id,
            actor=actor,
            reason=reason,
            content=content,
            now=self.clock(),
            links=self._subjects,
        )

    async def relate(
        self,
        from_id: str,
        to_id: str,
        relation: str,
        *,
        confidence: float = 1.0,
        source: str = "",
        actor: str = "operator",
    ) -> str:
        """Operators: an edge between two memories of one mind (ids or unique prefixes); returns the
        relationship id."""
        ids = [await self.resolve_memory(given) for given in (from_id, to_id)]
        return await upkeep.relate(
            self.memories,
            self.writer(),
            ids[0],
            ids[1],
            relation,
            now=self.clock(),
            confidence=confidence,
            source=source,
            actor=actor,
        )

    async def decay_tick(self, workspaces: Sequence[str] | None = None) -> list[str]:
        """Publish a decay tick now for ``workspaces`` (every one with memories): what faded or
        expired in the last ``NOEMA_DECAY_INTERVAL``."""
        now = self.clock()
        since = now - timedelta(seconds=self._decay_interval_s)
        return await upkeep.decay_tick(self.memories, self.writer(), now, workspaces, since=since)

    async def embed_missing(
        self, *, batch: int = 64, progress: Callable[[int, int], None] | None = None
    ) -> tuple[int, str]:
        """Backfill: embed every memory without a vector for the configured model; returns how many
        and the model (an :class:`OperationError` when no embedder is configured)."""
        embedder = await self.embedder()
        if embedder is None:
            raise OperationError("no embedder configured (NOEMA_EMBEDDER=none)")
        done = await upkeep.embed_missing(
            self.memories, self.writer(), embedder, now=self.clock, batch=batch, progress=progress
        )
        return done, embedder.name
