"""The reads of memory over the read model alone: search, the listing, the timeline, and whether a
workspace ever recorded anything.

The application facade (:class:`noema.application.facade.Noema`) is one of these with everything
else on top; a process that only reads memory (``noemactl memory search|list|timeline``) opens one
by itself (:func:`noema.composition.reader.open_reader`), without the knowledge operations, the
writes, the lineage and the audit machinery it would never call (issue 32: a search's start-up).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from noema.application.search import MODES, Recall, SearchResponse
from noema.errors import InvalidQuery
from noema.ports import RecallFilters
from noema.records import dataclass

if TYPE_CHECKING:
    # The operators' reads and their views (msgspec Structs, the event catalog's tags) load with the
    # first listing or timeline: a search needs neither (issue 32: its start-up).
    from noema.application.access import AccessControl, Caller
    from noema.application.views import ListQuery, MemoryPage, TimelineQuery
    from noema.ports import Embedder, MemoryReads, RecallVoices, SearchTimer

__all__ = ["MemoryReader", "SearchOptions"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class SearchOptions:
    """What a search may be narrowed to, besides the caller's workspace."""

    mode: str = "hybrid"
    profile: str = "hybrid"
    limit: int = 10
    mind: str | None = None
    kinds: Sequence[str] = ()
    epistemic_kinds: Sequence[str] = ()
    domains: Sequence[str] = ()
    statuses: Sequence[str] = ()
    """Only these statuses; by default active only, or every status with ``include_inactive``."""
    since: datetime | None = None
    until: datetime | None = None
    repo: str | None = None
    """The current repository: its memories rank first (the others still follow)."""
    strict: bool = False
    include_inactive: bool = False
    """Also inactive statuses (unless ``statuses`` is given) and expired memories."""


class MemoryReader:
    """Search, list and page through memory, as every surface calls it (over the ports it is given)."""

    def __init__(
        self,
        *,
        memories: MemoryReads,
        voices: RecallVoices,
        access: AccessControl,
        embedder: Callable[[], Awaitable[Embedder | None]],
        clock: Callable[[], datetime] = _utcnow,
        metrics: SearchTimer | None = None,
    ) -> None:
        self.memories = memories
        """The operators' reads of the read model (:class:`~noema.ports.MemoryReads`)."""
        self.access = access
        self.clock = clock
        """The time every operation of this instance takes as "now" (tests pin it)."""
        self._voices = voices
        self._load_embedder = embedder
        self._metrics = metrics

    async def embedder(self) -> Embedder | None:
        """The query embedder (loaded on first use; None when NOEMA_EMBEDDER=none)."""
        return await self._load_embedder()

    async def search(
        self, caller: Caller | None, query: str, options: SearchOptions, workspace: str | None = None
    ) -> SearchResponse:
        """search_memory: an agent's search is scoped to its workspace and honours its grants; an
        operator searches the workspace of its (operator) ``caller``, or with ``caller`` None the
        given ``workspace`` or, None, all of them. Bad input is an :class:`InvalidQuery`."""
        readable = await self.access.readable_domains(caller) if caller else None
        filters = RecallFilters(
            workspace=caller.workspace if caller else workspace,
            mind=options.mind,
            kinds=tuple(options.kinds),
            epistemic_kinds=tuple(options.epistemic_kinds),
            domains=tuple(options.domains),
            statuses=tuple(options.statuses) or (() if options.include_inactive else ("active",)),
            since=options.since,
            until=options.until,
            include_expired=options.include_inactive,
            readable_domains=readable,
            now=self.clock(),
        )
        embedder = await self.embedder() if options.mode != "keyword" else None
        recall = Recall(self._voices, embedder)
        # The mode is the caller's text until Recall checks it: label an unknown one as such.
        mode = options.mode if options.mode in MODES else "unknown"
        try:
            # Timed when the process keeps metrics (a served one); a one-shot command keeps none.
            timed = self._metrics.timed_search(mode) if self._metrics else contextlib.nullcontext()
            with timed:
                return await recall.search(
                    query,
                    filters,
                    mode=options.mode,
                    profile=options.profile,
                    limit=options.limit,
                    strict=options.strict,
                    repo=options.repo,
                    now=self.clock(),
                )
        except ValueError as exc:  # a query the database cannot read is one too (the voices')
            raise InvalidQuery(str(exc)) from None

    async def list_memories(self, query: ListQuery) -> MemoryPage:
        """Operators: memories with filters, newest first (``query.workspace`` None = every workspace;
        the surface limits it to what its caller may see)."""
        from noema.application import reads

        return await reads.list_memories(self.memories, query)

    async def timeline(self, query: TimelineQuery) -> MemoryPage:
        """Operators: a workspace's memories in the order things happened."""
        from noema.application import reads

        return await reads.timeline(self.memories, query)

    async def workspace_exists(self, workspace: str) -> bool:
        """Whether anything was ever recorded in ``workspace`` (to tell a typo from an empty answer)."""
        from noema.application import reads

        return await reads.workspace_exists(self.memories, workspace)
