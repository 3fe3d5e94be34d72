"""Start-up benchmark: how long `noemactl` takes before it does any work.

    python -m bench.startup [--runs N] [--before DIR] [--checked-only] [--out FILE]

Against one `noemactl up` (bench._instance, with a few observations stored), each run times, as a
user sees them (a fresh process, wall clock from spawn to exit or answer):

- ``help``: ``noemactl --help``; ``version``: ``noemactl --version``; ``*_cpu``: the CPU time
  (user + system) of the same process, which a loaded machine inflates far less than wall time;
- ``search_keyword`` / ``search_hybrid``: ``noemactl memory search QUERY --mode M --json``, and the
  query's own time as the answer reports it (``timings_ms``; hybrid's includes loading the query
  embedder on first use in the process); ``*_overhead`` is the wall time minus that;
- ``mcp_initialize``: ``noemactl mcp serve`` over stdio, from spawn until the answer to
  ``initialize`` is read (the server connects to NATS and PostgreSQL first).

``--checked-only`` times only what the checks judge (``--help`` and the keyword search), so that
more rounds fit in the same time on a loaded machine, and adds their ratio
(``keyword_to_help_cpu``): what a search costs on top of the command tree, which load inflates less
than either figure.

With ``--before DIR`` (a checkout of an earlier commit, e.g. ``git archive <commit> | tar -x -C
DIR``), every run times the same commands with that tree's code first on PYTHONPATH too,
interleaved with this tree's, so that both see the same machine load. Prints JSON with the median
of every figure per variant, the after/before ratios, the load average at start and end and the
number of cores, and ``checks``: ``--help`` and a keyword search each within 0.25 s of CPU (a loaded
machine inflates CPU time too: compare at a quiet moment); also to FILE.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._instance import Instance, running_instance
from ._loadprobe import versions
from ._output import emit

__all__ = ["main"]

WORKSPACE = "bench"
OBSERVATIONS = (
    "the deploy key rotates on Fridays",
    "the billing service deploys from the release branch",
    "staging uses its own deploy key, kept in the vault",
)
QUERY = "deploy key"
CPU_TARGET_S = 0.25
"""issue 32: `noemactl --help` and a keyword search each within this much CPU time (median)."""
MCP_TIMEOUT_S = 120.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench.startup", "version": "1"},
    },
}


def _noemactl() -> list[str]:
    """The console script users run, beside this interpreter (else the module)."""
    script = Path(sys.executable).parent / "noemactl"
    return [str(script)] if script.exists() else [sys.executable, "-m", "noema_cli.main"]


def _variant_env(base: Mapping[str, str], tree: Path | None) -> dict[str, str]:
    env = dict(base)
    if tree is not None:
        paths = [str(tree / part) for part in ("libs", "services", "schemas", "sdk")]
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _timed(args: list[str], env: Mapping[str, str]) -> tuple[float, float, str]:
    """Run to completion: wall time, the process's CPU time (user + system), its output."""
    cpu, started = _children_cpu(), time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=MCP_TIMEOUT_S)
    elapsed, cpu = time.perf_counter() - started, _children_cpu() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return elapsed, cpu, done.stdout


def _search(env: Mapping[str, str], mode: str) -> dict[str, float]:
    wall, cpu, answer = _timed(
        [*_noemactl(), "memory", "search", QUERY, "-w", WORKSPACE, "--mode", mode, "--json"], env
    )
    query_ms = sum(json.loads(answer)["timings_ms"].values())
    return {
        f"search_{mode}": wall,
        f"search_{mode}_cpu": cpu,
        f"search_{mode}_query": query_ms / 1000,
        f"search_{mode}_overhead": wall - query_ms / 1000,
    }


def _mcp_initialize(env: Mapping[str, str]) -> float:
    """Spawn the stdio server, send ``initialize``, time until its answer is read."""
    args = [*_noemactl(), "mcp", "serve", "-w", WORKSPACE, "-a", "bench"]
    started = time.perf_counter()
    proc = subprocess.Popen(
        args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        elapsed = time.perf_counter() - started
        if not line:
            proc.kill()
            _, stderr = proc.communicate(timeout=30)
            raise RuntimeError(f"mcp serve closed stdout without answering: {stderr[-2000:]!r}")
        answer = json.loads(line)
        if "result" not in answer:
            raise RuntimeError(f"mcp serve answered initialize with {answer}")
        return elapsed
    finally:
        proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _one_run(env: Mapping[str, str], checked_only: bool = False) -> dict[str, float]:
    figures: dict[str, float] = {}
    for name in ("help",) if checked_only else ("help", "version"):
        figures[name], figures[f"{name}_cpu"], _ = _timed([*_noemactl(), f"--{name}"], env)
    figures.update(_search(env, "keyword"))
    if not checked_only:
        figures.update(_search(env, "hybrid"))
        figures["mcp_initialize"] = _mcp_initialize(env)
    return figures


def _seed(inst: Instance, env: Mapping[str, str]) -> None:
    """A few observations, then wait until a keyword search finds one (bounded)."""
    for text in OBSERVATIONS:
        _timed([*_noemactl(), "observe", text, "-w", WORKSPACE, "-m", "ops"], env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        *_, answer = _timed(
            [*_noemactl(), "memory", "search", QUERY, "-w", WORKSPACE, "--mode", "keyword", "--json"], env
        )
        if json.loads(answer)["results"]:
            return
        time.sleep(1)
    raise RuntimeError(f"no memory of the observations in {inst.data_dir} after 120 s")


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def run(runs: int, before: Path | None, checked_only: bool = False) -> dict[str, Any]:
    """Start an instance, seed it, time ``runs`` rounds of every command per variant."""
    load_start = os.getloadavg()
    with running_instance() as inst:
        # With bytecode caches, as an installed wheel has them (the first round writes them).
        drop = ("NOEMA_", "PYTHONDONTWRITEBYTECODE")
        base = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        base.update(NOEMA_DATA_DIR=str(inst.data_dir), NOEMA_LOG_LEVEL="warning")
        variants = {"after": _variant_env(base, None)}
        if before is not None:
            variants = {"before": _variant_env(base, before), **variants}
        _seed(inst, variants["after"])
        for env in variants.values():  # warm the page cache and the bytecode caches once
            _one_run(env, checked_only)
        samples: dict[str, dict[str, list[float]]] = {name: {} for name in variants}
        for _ in range(runs):
            for name, env in variants.items():
                for key, value in _one_run(env, checked_only).items():
                    samples[name].setdefault(key, []).append(value)
    load_end = os.getloadavg()
    medians = {name: {k: _median(v) for k, v in figures.items()} for name, figures in samples.items()}
    for figures in medians.values():
        figures["keyword_to_help_cpu"] = round(figures["search_keyword_cpu"] / figures["help_cpu"], 2)
    result: dict[str, Any] = {
        "runs": runs,
        "cores": os.cpu_count(),
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in load_end],
        "median_s": medians,
        **versions(),
    }
    after = medians["after"]
    result["checks"] = {
        f"help_cpu <= {CPU_TARGET_S}": after["help_cpu"] <= CPU_TARGET_S,
        f"search_keyword_cpu <= {CPU_TARGET_S}": after["search_keyword_cpu"] <= CPU_TARGET_S,
    }
    result["all_checks_held"] = all(result["checks"].values())
    if before is not None:
        result["before_tree"] = str(before)
        result["ratio_after_to_before"] = {
            k: round(medians["after"][k] / medians["before"][k], 2)
            for k in medians["after"]
            if medians["before"].get(k)
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="Timed rounds per variant (default 7).")
    parser.add_argument(
        "--before", type=Path, help="A checkout of an earlier commit, timed interleaved with this tree."
    )
    parser.add_argument(
        "--checked-only", action="store_true", help="Time only --help and the keyword search (the checks)."
    )
    parser.add_argument("--out", type=Path, help="Also write the JSON here.")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.before is not None and not (args.before / "services" / "noema_cli").is_dir():
        parser.error(f"--before {args.before}: no services/noema_cli there (a checkout of Noema?)")
    emit(run(args.runs, args.before, args.checked_only), args.out)


if __name__ == "__main__":
    main()
