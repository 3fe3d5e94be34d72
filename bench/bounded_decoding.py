"""What the bounded decoding costs per message (noema_events.bounded, docs/reliability.md), in one
process, without servers: each kind of message decoded as Noema decodes it (the depth and size
pre-scan, then the parser) against the same parser alone, in the same run.

    python -m bench.bounded_decoding [--repeat 15] [--out FILE]

Messages: an observation and a memory.created (the golden samples), a memory.embedded with a
1,024-dimension vector, an attention cycle of 500 decisions (the biggest real event, more brackets
than the depth limit, so the exact scan runs), and an HTTP body. Per message, the median over
``--repeat`` rounds of CPU microseconds per message, guarded and unguarded, and their ratio; and what
refusing a 10 KB body nested 5,000 levels deep costs (it never reaches the parser).

JSON on stdout (and in ``--out``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from noema_events import AnyEvent, decode_event
from noema_events.bounded import OutOfBounds, check_bounds

from ._output import emit

__all__ = ["main"]

GOLDEN = Path(__file__).resolve().parents[1] / "schemas" / "golden"


def _golden(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((GOLDEN / f"{name}.json").read_text())
    return loaded


def _messages() -> dict[str, bytes]:
    embedded = _golden("memory.embedded.v1")
    embedded["payload"].update(dimensions=1024, vector=[0.0123456789] * 1024)
    cycle = _golden("attention.decided.v1")
    cycle["payload"]["decisions"] = cycle["payload"]["decisions"][:1] * 500
    body = {"workspace": "acme", "content": "the deploy key rotates on Fridays", "reason": "runbook"}
    return {
        "observation": json.dumps(_golden("observation.recorded.v1")).encode(),
        "memory_created": json.dumps(_golden("memory.created.v1")).encode(),
        "embedded_1024": json.dumps(embedded).encode(),
        "attention_500": json.dumps(cycle).encode(),
        "http_body": json.dumps(body).encode(),
    }


def _per_message_us(work: Callable[[bytes], object], data: bytes, count: int, repeat: int) -> float:
    """Median over ``repeat`` rounds of CPU microseconds per decode of ``data``."""
    rounds = []
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(count):
            work(data)
        rounds.append((time.process_time() - started) / count * 1e6)
    return round(statistics.median(rounds), 3)


def run(repeat: int) -> dict[str, Any]:
    events = msgspec.json.Decoder(AnyEvent)
    figures: dict[str, Any] = {}
    for name, data in _messages().items():
        count = max(20, 200_000 // len(data))
        parse: Callable[[bytes], object] = msgspec.json.decode if name == "http_body" else events.decode

        def guarded(d: bytes, parse: Callable[[bytes], object] = parse) -> object:
            check_bounds(d, max_bytes=None)
            return parse(d)

        # Interleaved rounds, so that the machine's load falls on both alike.
        pairs = [
            (_per_message_us(guarded, data, count, 1), _per_message_us(parse, data, count, 1))
            for _ in range(repeat)
        ]
        with_guard = statistics.median(g for g, _ in pairs)
        without = statistics.median(b for _, b in pairs)
        figures[name] = {
            "bytes": len(data),
            "guarded_us": round(with_guard, 3),
            "unguarded_us": round(without, 3),
            "ratio": round(with_guard / without, 3),
        }
        if name != "http_body":  # the whole of what a worker does to read it (upcasting, NUL check)
            figures[name]["decode_event_us"] = _per_message_us(decode_event, data, count, repeat)
    poison = b'{"content": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"

    def refuse(data: bytes) -> None:
        try:
            check_bounds(data)
        except OutOfBounds:
            return
        raise AssertionError("the poison passed the guard")

    figures["poison_10kb_refused_us"] = _per_message_us(refuse, poison, 2_000, repeat)
    ratios = [v["ratio"] for v in figures.values() if isinstance(v, dict)]
    checks = {
        "events_guarded_within_2x": all(
            v["ratio"] <= 2.0 for n, v in figures.items() if isinstance(v, dict) and n != "http_body"
        ),
        "poison_refused_faster_than_the_biggest_event_parses": (
            figures["poison_10kb_refused_us"] < figures["attention_500"]["unguarded_us"]
        ),
    }
    return {
        "bench": "bounded_decoding",
        "repeat": repeat,
        "median_ratio": round(statistics.median(ratios), 3),
        **figures,
        "checks": checks,
        "all_checks_held": all(checks.values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    emit(run(args.repeat), args.out)


if __name__ == "__main__":
    main()
