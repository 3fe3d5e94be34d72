"""The conflicts worker waits for its fact's workspace only (issue 13): before deciding, the read
model must hold everything of that workspace stored so far, and nothing else. A fact of a quiet
tenant is decided while another tenant's events wait to be projected; a fact whose own workspace has
unprojected events still waits for them."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.msg import Msg

from noema.adapters.jetstream import DeadLetters, EventPublisher, stream_last_seq
from noema.adapters.postgres import ReadModelProjection
from noema.adapters.pull import Puller, durable_puller
from noema.application.knowledge import Caller
from noema.composition.instance import connected_knowledge
from noema_conflicts.service import ConflictsHandler
from noema_projector.service import build as build_projector
from tests.conftest import Harness
from tests.support import assert_eventually

pytestmark = pytest.mark.integration

ACME = Caller("acme", "alice", "engineer")
GLOBEX = Caller("globex", "bob", "engineer")


async def projected(harness: Harness) -> bool:
    last = await stream_last_seq(harness.js, harness.topology.event_stream)
    async with harness.pool.acquire() as conn:
        return bool(await ReadModelProjection().position(conn) == last)


async def fact_messages(harness: Harness, count: int) -> tuple[Puller, list[Msg]]:
    t = harness.topology
    puller = await durable_puller(
        harness.nc,
        t.event_stream,
        "scope_test",
        f"{t.prefix}.evt.*.*.fact_proposed",
        count,
        ack_wait=60.0,
        max_ack_pending=count,
    )
    msgs: list[Msg] = []
    while len(msgs) < count:
        msgs += await puller.fetch(timeout=5)
    return puller, msgs


async def test_a_fact_waits_for_its_own_workspace_not_for_another_tenants_backlog(harness: Harness) -> None:
    projector = await harness.start(build_projector)
    k = connected_knowledge(harness.pool, harness.nc, harness.topology)
    await k.propose_fact(ACME, "ops", "deploy-day", "Deploys happen on Fridays")
    await k.propose_fact(ACME, "ops", "deploy-day", "Deploys happen on Tuesdays")
    await assert_eventually(lambda: projected(harness))

    projector.shutdown()  # the projector stops: whatever is stored from now on stays unprojected
    [task] = [t for t in asyncio.all_tasks() if t.get_name() == "projector"]
    await asyncio.wait_for(task, 10)
    for n in range(20):  # another tenant keeps writing
        await k.propose_fact(GLOBEX, "ops", f"topic-{n}", f"globex fact number {n}")

    t = harness.topology
    handler = ConflictsHandler(
        harness.pool,
        EventPublisher(harness.nc, t),
        wait_timeout=3.0,
        js=harness.js,
        topology=t,
        dead_letters=DeadLetters(harness.js, t, "conflicts"),
    )
    puller, msgs = await fact_messages(harness, 2)
    before = await stream_last_seq(harness.js, t.event_stream)
    await handler(msgs)  # decided without waiting for globex's 20 unprojected events
    stored = [
        (await harness.js.get_msg(t.event_stream, seq)).subject
        for seq in range(before + 1, await stream_last_seq(harness.js, t.event_stream) + 1)
    ]
    assert f"{t.prefix}.evt.acme._.conflict_recorded" in stored, stored

    # A fact of a workspace whose own events are not projected yet still waits for them.
    await k.propose_fact(GLOBEX, "ops", "topic-0", "globex fact number zero, restated")
    more: list[Msg] = []
    while len(more) < 21:
        got = await puller.fetch(timeout=5)
        for msg in got[:-1] if len(more) + len(got) == 21 else got:
            await msg.ack()  # globex's earlier facts: not decided here
        more += got
    with pytest.raises(TimeoutError, match="did not reach"):
        await handler([more[-1]])
    await puller.stop()
