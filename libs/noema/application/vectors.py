"""Passage vectors computed once: taken from the shared cache when another worker already embedded
the same text, otherwise embedded here (in one batch, off the event loop) and left in the cache."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from noema.ports import Embedder, VectorCache
from noema.threads import in_daemon_thread

__all__ = ["POLL_S", "PassageVectors", "passage_vectors"]

POLL_S = 0.25
"""How often a worker waiting for another's vectors looks again."""


@dataclass(frozen=True)
class PassageVectors:
    """One vector per document asked for, how many of them were embedded here, and whether some
    awaited ones never came within the patience."""

    vectors: list[list[float]]
    embedded: int
    gave_up: bool = False


async def passage_vectors(
    embedder: Embedder,
    documents: Sequence[str],
    cache: VectorCache | None = None,
    *,
    awaited: Collection[str] = (),
    patience_s: float = 0.0,
    stopping: Callable[[], bool] = lambda: False,
) -> PassageVectors:
    """The passage vector of each document (equal texts are embedded once).

    Documents in ``awaited`` are ones a running producer (retrieve) computes anyway: while its mark
    in the cache is fresh, they are waited for up to ``patience_s`` (polling the cache) before being
    embedded here. A producer far behind is thus overtaken after a while — and from then on it finds
    this worker's vectors in the cache instead.
    """
    unique = list(dict.fromkeys(documents))
    found = await cache.get_many(unique) if cache is not None else [None] * len(unique)
    by_text = {text: vec for text, vec in zip(unique, found, strict=True) if vec is not None}
    waiting = [text for text in unique if text not in by_text and text in awaited]
    gave_up = False
    if cache is not None and waiting and patience_s > 0 and await cache.producer_alive(time.time()):
        deadline = time.monotonic() + patience_s
        while waiting and time.monotonic() < deadline and not stopping():
            await asyncio.sleep(POLL_S)
            got = await cache.get_many(waiting)
            by_text.update((text, vec) for text, vec in zip(waiting, got, strict=True) if vec is not None)
            waiting = [text for text in waiting if text not in by_text]
        gave_up = bool(waiting)
    missing = [text for text in unique if text not in by_text]
    if missing:
        # In a thread: embedding is seconds of CPU, and the event loop must keep answering NATS
        # pings and signals meanwhile.
        computed = await in_daemon_thread(lambda: embedder.embed_passages(missing))
        by_text.update(zip(missing, computed, strict=True))
        if cache is not None:
            await cache.put_many(missing, computed)
    return PassageVectors([by_text[text] for text in documents], len(missing), gave_up)
