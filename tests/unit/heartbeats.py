"""Heartbeat records as a worker writes them, for the verdicts' unit tests."""

from __future__ import annotations

from noema.runtime.health import HeartbeatRecord, instance_name

NOW = 1_800_000_000.0
"""The reader's clock in these tests."""


def beat(worker: str = "attend", ago: float = 1.0, **fields: object) -> HeartbeatRecord:
    """A record of ``worker`` (pid 41 on host-a) written ``ago`` seconds before :data:`NOW`."""
    defaults: dict[str, object] = {
        "instance": instance_name("host-a", 41),
        "host": "host-a",
        "pid": 41,
        "started_at": NOW - 3600,
        "beat_at": NOW - ago,
    }
    return HeartbeatRecord(worker=worker, **(defaults | fields))  # type: ignore[arg-type]
