"""Benchmarks: scripts that print JSON figures (docs/benchmarks.md), never tests."""

# Before anything imports NumPy: a benchmark's process then runs NumPy as Noema's processes do
# (single-threaded OpenBLAS; see noema/__init__.py).
import noema  # noqa: F401
