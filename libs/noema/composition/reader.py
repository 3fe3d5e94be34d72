"""A reader of memory (:class:`noema.application.memory_reads.MemoryReader`) over the located read
model alone: what ``noemactl memory search|list|timeline`` opens. It signs in to PostgreSQL as the
read-only role, as :meth:`noema.composition.instance.Instance.open` does, and builds the same
adapters the instance reads memory through; it connects to no NATS server and loads neither the
rest of the application (:class:`noema.application.facade.Noema`) nor the event publisher: a
keyword search's start-up (issue 32). A read as of a past point needs the stream: it opens an
instance."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from noema.adapters.postgres.knowledge import PostgresKnowledge
from noema.adapters.postgres.queries import MemoryQueries
from noema.adapters.postgres.tenancy import NO_WORKSPACE
from noema.adapters.postgres.voices import RecallStore
from noema.application.access import AccessControl
from noema.application.memory_reads import MemoryReader
from noema.ports import Embedder
from noema.runtime.settings import Located
from noema.runtime.wiring import open_pool

__all__ = ["QueryEmbedder", "open_reader"]


class QueryEmbedder:
    """The embedder the settings name, made by the first search that needs one (a model loads in a
    thread, in about a second), then kept: the reader's and the instance's."""

    def __init__(self, settings: Located) -> None:
        self._settings = settings
        self._lock = asyncio.Lock()
        self._loaded = False
        self._embedder: Embedder | None = None

    async def __call__(self) -> Embedder | None:
        async with self._lock:
            if not self._loaded:
                from noema.adapters.embedders import create_embedder

                self._embedder = await asyncio.to_thread(
                    create_embedder, self._settings.embedder, self._settings.remote_embedder
                )
                self._loaded = True
        return self._embedder


@contextlib.asynccontextmanager
async def open_reader(
    settings: Located, *, name: str = "noema", pool_size: int = 2, workspace: str = NO_WORKSPACE
) -> AsyncIterator[MemoryReader]:
    """Connect to the located read model as the read-only role (``name``: the connections' name in
    ``pg_stat_activity``; ``workspace``: the rows they see under row-level security, ``"*"`` every
    workspace); closes the connections on exit."""
    async with contextlib.AsyncExitStack() as stack:
        pool = await open_pool(
            settings,
            stack,
            "reader",
            app=name,
            max_size=pool_size,
            workspace=workspace,
            create=RecallStore.create_pool,
        )
        yield MemoryReader(
            memories=MemoryQueries(pool),
            voices=await RecallStore.open(pool),
            access=AccessControl(PostgresKnowledge(pool)),
            embedder=QueryEmbedder(settings),
        )
