"""A redelivered observation never yields a second, different decision (issue 11).

A crash after attend stored a cycle's events but before it acked the observations means JetStream
hands them out again, possibly in a batch of another shape (some acked, new ones behind them). The
restarted worker must recognise them as decided and store nothing new for them.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from noema.adapters.pull import Puller, durable_puller
from noema.client import publish_observation
from noema.domain.attention import AttentionConfig, memory_id_for
from noema_attend.service import build as build_attend
from noema_attend.worker import AttendHandler
from noema_events import decode_event
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = pytest.mark.integration


async def _read(h: Harness, first: int, count: int) -> list[Msg]:
    """Observations ``first``..``first+count-1`` as a fresh consumer delivers them (real messages)."""
    t = h.topology
    info = await h.js.add_consumer(
        t.observation_stream,
        ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=first,
            ack_policy=AckPolicy.EXPLICIT,
            filter_subject=t.observation_subjects,
            inactive_threshold=30,
        ),
    )
    assert info.name is not None
    puller = await Puller(h.nc, t.observation_stream, info.name, count).start()
    msgs: list[Msg] = []
    while len(msgs) < count:
        got = await puller.fetch(timeout=5)
        assert got, f"the stream stopped delivering after {len(msgs)} of {count}"
        msgs += got
    await puller.stop()
    return msgs[:count]


async def _events(h: Harness) -> list[tuple[str, str]]:
    """(type, id) of every event on the stream."""
    info = await h.js.stream_info(h.topology.event_stream)
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        event = decode_event((await h.js.get_msg(h.topology.event_stream, seq)).data or b"")
        out.append((event.type, event.id))
    return out


async def test_a_restarted_attend_decides_redelivered_observations_never_again(harness: Harness) -> None:
    for i in range(30):
        await publish_observation(
            harness.js,
            f"observation {i}: the deploy key rotates on day {i}",
            workspace="acme",
            mind="ops" if i % 3 else "dev",
            session="s1",
            topology=harness.topology,
        )
    config = AttentionConfig(threshold=0.0, capacity=50)

    # The first worker decides observations 1..20 as one cycle, then "crashes" before acking.
    await AttendHandler(harness.nc, harness.topology, config)(await _read(harness, 1, 20))
    before = await _events(harness)

    # The restarted worker gets 11..30 back in one batch: 11..20 decided already, 21..30 new.
    restarted = AttendHandler(harness.nc, harness.topology, config)
    await restarted(await _read(harness, 11, 20))
    after = await _events(harness)

    assert after[: len(before)] == before
    added = Counter(kind for kind, _ in after[len(before) :])
    assert added["memory.created.v1"] == 10  # only 21..30
    ids = [event_id for _, event_id in after]
    assert len(ids) == len(set(ids)), "an event id was stored twice"
    decided: Counter[str] = Counter()
    for seq in range(1, len(after) + 1):
        event = decode_event((await harness.js.get_msg(harness.topology.event_stream, seq)).data or b"")
        if event.type == "attention.decided.v1":
            decided.update(d.candidate_id for d in event.payload.decisions)  # type: ignore[attr-defined]
    assert len(decided) == 30
    assert set(decided.values()) == {1}, "an observation was decided twice"

    # A third start with everything redelivered again stores nothing at all.
    await AttendHandler(harness.nc, harness.topology, config)(await _read(harness, 1, 30))
    assert await _events(harness) == after


async def test_a_restarted_attend_resumes_in_order_after_candidates_a_crash_left_unacked(
    harness: Harness,
) -> None:
    """A crashed attend leaves candidates delivered but never acked; JetStream would hand them out
    again only after the ack wait, behind newer ones. The restarted worker must decide every one of
    them, once, without waiting for that."""
    t = harness.topology
    for i in range(40):
        await publish_observation(
            harness.js, f"observation {i} about the release train", workspace="acme", mind="ops", topology=t
        )
    config = AttentionConfig(threshold=0.0, capacity=100)
    # The crashed process: its durable consumer delivered 1..30; it decided 1..10, acked none.
    puller = await durable_puller(
        harness.nc,
        t.observation_stream,
        t.durable("attend"),
        t.observation_subjects,
        30,
        ack_wait=60.0,
        max_ack_pending=20_000,
    )
    delivered: list[Msg] = []
    while len(delivered) < 30:
        delivered += await puller.fetch(timeout=5)
    await puller.stop()
    await AttendHandler(harness.nc, t, config)(delivered[:10])

    await harness.start(build_attend)  # the restart

    async def decided_once() -> bool:
        return len(await _decided_candidates(harness)) == 40

    await assert_eventually(decided_once, timeout=30)  # well inside the 60 s ack wait
    candidates = await _decided_candidates(harness)
    assert set(candidates.values()) == {1}, "an observation was decided twice"


async def _decided_candidates(h: Harness) -> Counter[str]:
    """How many decisions each candidate got, over every attention.decided on the stream."""
    decided: Counter[str] = Counter()
    info = await h.js.stream_info(h.topology.event_stream)
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        event = decode_event((await h.js.get_msg(h.topology.event_stream, seq)).data or b"")
        if event.type == "attention.decided.v1":
            decided.update(d.candidate_id for d in event.payload.decisions)  # type: ignore[attr-defined]
    return decided


async def test_a_restarted_attend_continues_each_sessions_episode_chain(harness: Harness) -> None:
    """Session heads live in the mind's working_memory.updated events, so a new attend instance (a
    restart, or another instance taking the mind over) chains a session's next episode onto the
    last one decided before it, as one instance that never stopped would."""
    sessions = ["standup", "retro", "standup", "standup", "retro", "standup", "retro", "standup"]
    ids = []
    for i, session in enumerate(sessions):
        ids.append(f"turn-{i}")
        await publish_observation(
            harness.js,
            f"turn {i} of the {session}: the deploy key rotates on day {i}",
            workspace="acme",
            mind="ops",
            session=session,
            observation_id=f"turn-{i}",
            topology=harness.topology,
        )
    config = AttentionConfig(threshold=0.0, capacity=50)
    await AttendHandler(harness.nc, harness.topology, config)(await _read(harness, 1, 4))
    await AttendHandler(harness.nc, harness.topology, config)(await _read(harness, 5, 4))

    edges = set()
    for seq in range(1, (await harness.js.stream_info(harness.topology.event_stream)).state.last_seq + 1):
        event = decode_event((await harness.js.get_msg(harness.topology.event_stream, seq)).data or b"")
        if event.type == "relationship.added.v1":
            edges.add((event.payload.from_id, event.payload.to_id))  # type: ignore[attr-defined]
    memory = {i: memory_id_for(f"turn-{i}") for i in range(len(sessions))}
    expected = set()
    for session in ("standup", "retro"):
        turns = [memory[i] for i, s in enumerate(sessions) if s == session]
        expected |= set(itertools.pairwise(turns))
    assert edges == expected, "a session's chain is unbroken across the change of instance"
