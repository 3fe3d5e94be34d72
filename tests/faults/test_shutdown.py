"""Ctrl-C while every worker is busy stops everything without killing anything, and leaves nothing
running (no worker, no nats-server, no postmaster)."""

from __future__ import annotations

import asyncio

import pytest

from noema.client import build_observation
from noema_events import encode_event
from tests.faults.instance import TOPOLOGY, Instance, eventually, memory_counts, record, temporary_root

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

N = 3000


async def test_ctrl_c_mid_ingest_stops_every_process_without_a_kill() -> None:
    with temporary_root() as root:
        instance = Instance(root)
        instance.start()
        try:
            await instance.ready()
            assert instance.nc is not None
            assert instance.pool is not None
            pool, js = instance.pool, instance.nc.jetstream()
            acks = []
            for i in range(N):
                obs = build_observation(f"observation {i} about host-{i % 89}", workspace="acme", mind="ops")
                acks.append(
                    await js.publish_async(
                        TOPOLOGY.observation_subject("acme", "ops"),
                        encode_event(obs),
                        headers={"Nats-Msg-Id": obs.id},
                    )
                )
            await asyncio.gather(*acks)

            async def busy() -> bool:
                # Memories are being made, so retrieve recalls and embed embeds, with work queued.
                return len(await memory_counts(pool)) >= N // 3

            await eventually(busy, 120, 0.2, "a third of the ingest")
            embedded = await pool.fetchval("SELECT count(*) FROM memory_embeddings")
            assert embedded < N, "embed must still have work when Ctrl-C comes"
            await instance.close_clients()
            took = instance.stop()  # asserts exit 0, no service killed, nothing left running
            record(
                "ctrl-c-mid-ingest", observations=N, embedded_before_stop=int(embedded), stop_s=round(took, 1)
            )
        finally:
            await instance.close_clients()
            instance.force_stop()
