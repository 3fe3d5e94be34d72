"""Composition root of the attend worker: ``python -m noema_attend``."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from noema.adapters.jetstream import connect, ensure_streams
from noema.domain.attention import AttentionConfig
from noema.logging import configure_logging
from noema.runtime import locate
from noema.settings import Settings
from noema.topology import Topology
from noema.worker import PullWorker, run_until_signalled

from .worker import AttendHandler


async def main(settings: Settings) -> None:
    """Wire the attend worker from settings and run it until SIGTERM."""
    settings = locate(settings)
    assert settings.nats_url
    topology = Topology(settings.prefix)
    async with AsyncExitStack() as stack:
        nc = await connect(settings.nats_url, name="noema-attend")
        stack.push_async_callback(nc.close)
        js = nc.jetstream()
        await ensure_streams(js, topology, settings.duplicate_window_s)
        durable = topology.durable("attend")
        psub = await js.pull_subscribe(
            topology.observation_subjects,
            durable=durable,
            stream=topology.observation_stream,
            config=ConsumerConfig(
                durable_name=durable,
                ack_policy=AckPolicy.EXPLICIT,
                deliver_policy=DeliverPolicy.ALL,
                ack_wait=60.0,
                max_ack_pending=20_000,
            ),
        )
        handler = AttendHandler(
            js, topology, AttentionConfig(threshold=settings.attend_threshold, capacity=settings.attend_capacity)
        )
        worker = PullWorker("attend", psub, handler, settings.batch_size)
        await run_until_signalled(worker.run, worker.shutdown)


if __name__ == "__main__":
    _settings = Settings.from_env()
    configure_logging(_settings.log_format, _settings.log_level)
    asyncio.run(main(_settings))
