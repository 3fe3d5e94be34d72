"""Fenced publishes (``Outgoing.expected_last``): the server refuses a message whose subject moved
since it was read, and with it the rest of the publish — atomic batch or one by one — which is what
keeps a former attend owner from storing a stale cycle (docs/reliability.md, Fencing)."""

from __future__ import annotations

import pytest

from noema.adapters.jetstream import Outgoing, last_on_subject, store_batch, stream_last_seq
from noema.ports import ConcurrentWrite
from tests.conftest import Harness

pytestmark = pytest.mark.integration


def _subjects(h: Harness) -> tuple[str, str]:
    t = h.topology
    return (
        t.event_subject_for("acme", "ops", "attention.decided"),
        t.event_subject_for("acme", "ops", "memory.created"),
    )


async def test_an_atomic_batch_whose_fence_moved_stores_nothing(harness: Harness) -> None:
    decided, created = _subjects(harness)
    js, nc = harness.js, harness.nc
    seqs = await store_batch(
        nc, js, [Outgoing(decided, b"{}", "d1", expected_last=0), Outgoing(created, b"{}", "m1")]
    )
    assert seqs == [1, 2]
    assert (await last_on_subject(js, harness.topology.event_stream, decided) or (0,))[0] == 1

    # Read at 0 (before d1): refused whole, the message that came after the fence too.
    with pytest.raises(ConcurrentWrite):
        await store_batch(
            nc, js, [Outgoing(decided, b"{}", "d2", expected_last=0), Outgoing(created, b"{}", "m2")]
        )
    assert await stream_last_seq(js, harness.topology.event_stream) == 2

    # The fence as it stands: stored, and the sequences given are where each message is.
    seqs = await store_batch(
        nc,
        js,
        [
            Outgoing(created, b"{}", "m3"),
            Outgoing(decided, b"{}", "d3", expected_last=1),
            Outgoing(created, b"{}", "m4"),
        ],
    )
    assert seqs == [3, 4, 5]
    assert (await last_on_subject(js, harness.topology.event_stream, decided) or (0,))[0] == 4


async def test_one_by_one_a_refused_fence_stores_nothing_after_it(harness: Harness) -> None:
    """A batch holding an id already stored goes message by message (the server refuses such an
    atomic batch): a fence that moved stops it there."""
    decided, created = _subjects(harness)
    js, nc = harness.js, harness.nc
    await store_batch(
        nc, js, [Outgoing(decided, b"{}", "d1", expected_last=0), Outgoing(created, b"{}", "m1")]
    )

    with pytest.raises(ConcurrentWrite):
        await store_batch(
            nc,
            js,
            [
                Outgoing(created, b"{}", "m1"),
                Outgoing(decided, b"{}", "d2", expected_last=0),
                Outgoing(created, b"{}", "m2"),
            ],
        )
    assert await stream_last_seq(js, harness.topology.event_stream) == 2, "stored after a refused fence"

    # With the fence as it stands the duplicate is dropped (its sequence is the original's).
    seqs = await store_batch(
        nc,
        js,
        [
            Outgoing(created, b"{}", "m1"),
            Outgoing(decided, b"{}", "d2", expected_last=1),
            Outgoing(created, b"{}", "m2"),
        ],
    )
    assert seqs == [2, 3, 4]
