"""The shipped source files' syntax trees, parsed once per test process: several tests read the whole
tree (the layers, the imports' loops, SQL outside the adapters), each walking the same trees."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

__all__ = ["parsed"]


@functools.cache
def _parse(text: str, filename: str) -> ast.Module:
    return ast.parse(text, filename)


def parsed(path: Path) -> ast.Module:
    """The syntax tree of ``path`` as it reads now (shared: walk it, do not change it)."""
    return _parse(path.read_text(), str(path))
