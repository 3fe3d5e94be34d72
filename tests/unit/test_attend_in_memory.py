"""Attend's decision without transport (:class:`noema.application.attend.Attention`): the marks,
the restart and the fence that tests/integration/test_redelivery.py and test_claims.py check over
JetStream, here over the in-memory streams (:class:`noema.adapters.memory.attend_log.InMemoryAttendLog`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from noema.adapters.memory import InMemoryKnowledge
from noema.adapters.memory.attend_log import InMemoryAttendLog
from noema.adapters.memory.stream import InMemoryEventStream
from noema.application.attend import Attention, decided_through
from noema.application.deliveries import Delivered
from noema.client import build_observation
from noema.domain.attention import AttentionConfig, memory_id_for
from noema_events import AttentionDecided, MemoryCreated, ObservationRecorded

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CONFIG = AttentionConfig(threshold=0.0, capacity=50)


def observations(n: int, mind: str = "ops") -> list[ObservationRecorded]:
    return [
        build_observation(
            f"deploy {i} of the billing service went out at noon",
            workspace="acme",
            mind=mind,
            observation_id=f"obs-{mind}-{i}",
            occurred_at=NOW - timedelta(minutes=1),
        )
        for i in range(n)
    ]


def delivered(candidates: list[ObservationRecorded], first: int = 1) -> list[Delivered[ObservationRecorded]]:
    return [Delivered(seq, ev) for seq, ev in enumerate(candidates, first)]


def memories(log: InMemoryAttendLog) -> set[str]:
    return {ev.payload.memory_id for ev in log.stream.events if isinstance(ev, MemoryCreated)}


def decisions(log: InMemoryAttendLog) -> list[AttentionDecided]:
    return [ev for ev in log.stream.events if isinstance(ev, AttentionDecided)]


def attention(log: InMemoryAttendLog, decided: int | None = None) -> Attention:
    return Attention(log, CONFIG, clock=lambda: NOW, decided=decided)


async def test_a_cycle_is_decided_in_memory_and_its_mark_survives_a_restart() -> None:
    obs = observations(6)
    log = InMemoryAttendLog(InMemoryEventStream(InMemoryKnowledge()), obs)
    first = attention(log)
    await first(delivered(obs[:4]), 4)
    assert memories(log) == {memory_id_for(o.id) for o in obs[:4]}
    (decision,) = decisions(log)
    assert decision.payload.through_seq == 4 == first.decided_through
    # A new instance reads the mark from the stream; candidates up to it are decided already.
    assert await decided_through(log) == 4
    restarted = attention(log)
    assert await restarted.mark() == 4
    stored = len(log.stream.events)
    await restarted(delivered(obs[:4]), 4)  # redelivered: the mind's own mark says decided
    assert len(log.stream.events) == stored
    await restarted(delivered(obs[4:], 5), 6)
    assert memories(log) == {memory_id_for(o.id) for o in obs}


async def test_a_mark_the_candidate_stream_could_not_have_made_is_ignored() -> None:
    obs = observations(4)
    log = InMemoryAttendLog(InMemoryEventStream(InMemoryKnowledge()), obs)
    await attention(log)(delivered(obs), 4)
    log.candidates = obs[:2]  # a stream recreated shorter than the mark
    assert await decided_through(log) == 0


async def test_a_stale_instance_never_stores_a_second_decision() -> None:
    """Two instances decide the same mind; the one whose read of the mind is stale is fenced off,
    reads the mind again and finds its candidate decided: one decision per candidate."""
    obs = observations(3)
    log = InMemoryAttendLog(InMemoryEventStream(InMemoryKnowledge()), obs)
    stale, owner = attention(log), attention(log)
    await stale(delivered(obs[:1]), 1)  # the stale instance knows the mind as of its own decision
    await owner(delivered(obs[1:2], 2), 2)  # a new owner decides the next candidate
    await stale(delivered(obs[1:], 2), 3)  # the stale one tries it too, with one more
    decided = [[d.candidate_id for d in ev.payload.decisions] for ev in decisions(log)]
    assert decided == [[obs[0].id], [obs[1].id], [obs[2].id]]
