"""What an observation may hold, without the models: the one figure every surface checks (and
``noemactl --help`` shows, without loading msgspec)."""

from __future__ import annotations

__all__ = ["MAX_CONTENT"]

MAX_CONTENT = 32_000
"""The most characters an observation's content may have (every surface refuses more)."""
