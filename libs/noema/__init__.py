"""Noema core library: pure domain logic and the adapters (JetStream, PostgreSQL, embedders)."""

import os as _os

# NumPy's OpenBLAS runs matrix work on every core and its idle threads spin: a search's scoring
# (MMR over ~50 vectors of 384 dimensions) took 52 ms of CPU for 45 ms of wall time, against 14 ms
# single-threaded for the same wall time (``python -m bench.recall_cost``, docs/benchmarks.md). Read
# when NumPy loads, so it is set here, before any of Noema's modules imports NumPy.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__all__: list[str] = []
__version__ = "0.1.0"
