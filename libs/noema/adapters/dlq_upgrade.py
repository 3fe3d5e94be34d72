"""Make an old dead-letter stream deletable: recreate it with ``deny_delete: false``, keeping its
dead letters.

JetStream cannot lift ``deny_delete`` on an existing stream, and a stream cannot be renamed, so the
dead letters are moved aside and back with stream *sourcing* (the server copies every message,
subject and headers included):

1. the old stream stops taking new dead letters (its subjects are changed to a private one), so
   nothing can arrive that the copy would miss;
2. ``<name>_MOVE`` sources the old stream until it holds all of it; then it stops sourcing;
3. the old stream is deleted and created again from ``config``, sourcing ``<name>_MOVE`` (still on
   the private subject, so that the count of what it holds is the count of what was copied);
4. once it holds everything, it stops sourcing, takes its subjects back, and ``<name>_MOVE`` is
   deleted.

Every step is checked against the state the previous one leaves, so running it again after a crash
finishes the job. Between 1 and 4 no stream takes ``<prefix>.dlq.>``: a worker dead-lettering in
that moment gets an error and retries the message later. Dead letters get new sequences, and their
age (``max_age``) counts again from the move.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import structlog
from nats.js import JetStreamContext
from nats.js.api import StreamConfig, StreamInfo, StreamSource
from nats.js.errors import NotFoundError

__all__ = ["MOVE_SUFFIX", "make_deletable"]

MOVE_SUFFIX = "_MOVE"
"""Suffix of the stream that holds the dead letters while they are moved (see above)."""

log = structlog.get_logger("noema.dlq")


async def _info(js: JetStreamContext, name: str) -> StreamInfo | None:
    try:
        return await js.stream_info(name)
    except NotFoundError:
        return None


async def _holds(js: JetStreamContext, name: str, count: int, timeout: float) -> None:
    """Wait until stream ``name`` holds ``count`` messages (sourcing is asynchronous)."""
    deadline = time.monotonic() + timeout
    while True:
        info = await js.stream_info(name)
        if int(info.state.messages) >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} holds {info.state.messages} of {count} dead letters after {timeout}s")
        await asyncio.sleep(0.1)


async def make_deletable(js: JetStreamContext, config: StreamConfig, timeout: float = 120.0) -> int | None:
    """Recreate the dead-letter stream described by ``config`` (its final configuration) so that
    single dead letters can be deleted; returns how many were moved (None: nothing to do)."""
    name = str(config.name)
    move, retired = f"{name}{MOVE_SUFFIX}", [f"{name}.retired"]
    old, aside = await _info(js, name), await _info(js, move)
    if aside is None and (old is None or not old.config.deny_delete):
        return None  # already deletable (or not created yet: ensure_streams creates it so)
    if old is not None and old.config.deny_delete:
        if old.config.subjects != retired:
            await js.update_stream(replace(old.config, subjects=retired))
        count = int((await js.stream_info(name)).state.messages)
        if aside is None:
            await js.add_stream(
                StreamConfig(
                    name=move,
                    description=f"{name} being made deletable (noemactl dlq upgrade)",
                    sources=[StreamSource(name=name)],
                    storage=old.config.storage,
                    num_replicas=old.config.num_replicas,
                )
            )
        await _holds(js, move, count, timeout)
        # Stop sourcing (a stream may not source one that will source it: "detected cycle").
        await js.update_stream(
            StreamConfig(name=move, storage=old.config.storage, num_replicas=old.config.num_replicas)
        )
        await js.delete_stream(name)
        old = None
    moving = await js.stream_info(move)
    count = int(moving.state.messages)
    if old is None:
        await js.add_stream(replace(config, subjects=retired, sources=[StreamSource(name=move)]))
    await _holds(js, name, count, timeout)
    await js.update_stream(replace(config, sources=None))
    await js.delete_stream(move)
    log.info("dead-letter stream made deletable", stream=name, moved=count)
    return count
