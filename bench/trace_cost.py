"""What carrying trace context costs, in one process, without servers (noema.adapters.tracing).

    python -m bench.trace_cost [--observations 1000] [--events-per-observation 3] [--repeat 20] [--out FILE]

Times (CPU, best of ``--repeat``), per observation:

- ``attend_us``: attend's part of a cycle with no exporter (the default): carrying each candidate's
  context and choosing each event's headers (the events' ``Outgoing`` headers built as the
  publisher does), against ``attend_baseline_us``, the same headers built without tracing;
- ``attend_recorded_us``: the same with spans recorded (an SDK provider with no exporter);
- ``publisher_us``: making an observation's headers (``noema_sdk.tracing.trace_headers``: a new trace).

JSON on stdout (and in ``--out``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import msgspec
from opentelemetry.sdk.trace import TracerProvider

from noema.adapters import tracing
from noema.adapters.jetstream import Outgoing
from noema.ids import new_id
from noema_events import MemoryCreated, MemoryCreatedPayload
from noema_sdk.tracing import TRACEPARENT, new_traceparent, trace_headers

from ._output import emit

__all__ = ["main"]


def _events(observations: int, per: int) -> list[MemoryCreated]:
    template = MemoryCreated(
        id="",
        workspace="bench",
        mind="ops",
        occurred_at=datetime(2026, 12, 2, tzinfo=UTC),
        correlation_id="c",
        actor="attend",
        payload=MemoryCreatedPayload(
            memory_id="m", content="x", kind="episodic", epistemic_kind="observation"
        ),
    )
    return [
        msgspec.structs.replace(template, id=new_id(), causation_id=f"obs{i % observations}")
        for i in range(observations * per)
    ]


def _best(work: Callable[[], object], repeat: int, per: int) -> float:
    """Best CPU microseconds of ``work`` per observation."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return round(best / per * 1e6, 2)


def run(observations: int, per: int, repeat: int) -> dict[str, float]:
    events = _events(observations, per)
    incoming = [{"Nats-Msg-Id": f"obs{i}", TRACEPARENT: new_traceparent()} for i in range(observations)]

    def traced() -> None:
        with tracing.batch("noema.attend") as traces:
            for i, headers in enumerate(incoming):
                traces.carry(f"obs{i}", headers, **{"messaging.destination.name": "bench.obs.bench.ops"})
            [Outgoing("s", b"", e.id, tracing.outgoing(e)).all_headers() for e in events]

    def untraced() -> None:
        [Outgoing("s", b"", e.id).all_headers() for e in events]

    def publisher() -> None:
        for _ in range(observations):
            trace_headers()

    result = {
        "attend_us": _best(traced, repeat, observations),
        "attend_baseline_us": _best(untraced, repeat, observations),
        "publisher_us": _best(publisher, repeat, observations),
    }
    provider = TracerProvider()  # spans recorded, exported nowhere
    tracing.install(provider)
    try:
        result["attend_recorded_us"] = _best(traced, repeat, observations)
    finally:
        tracing.install(None)
        provider.shutdown()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--observations", type=int, default=1000)
    parser.add_argument("--events-per-observation", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    figures = run(args.observations, args.events_per_observation, args.repeat)
    emit(
        {"observations": args.observations, "events_per_observation": args.events_per_observation, **figures},
        args.out,
    )


if __name__ == "__main__":
    main()
