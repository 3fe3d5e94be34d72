"""PostgreSQL adapter: migrations, the projection, read queries and checksums (asyncpg).

The names below load with their module on first use: importing one module of this package (a
search's queries) does not load the projection, its handlers and the history's digests."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from noema.adapters.postgres.database import connect, create_pool, migrate
    from noema.adapters.postgres.history import history_start
    from noema.adapters.postgres.history import prune as prune_history
    from noema.adapters.postgres.projection import PROJECTED_TABLES, ReadModelProjection, checksum
    from noema.adapters.postgres.queries import MemoryQueries

__all__ = [
    "PROJECTED_TABLES",
    "MemoryQueries",
    "ReadModelProjection",
    "checksum",
    "connect",
    "create_pool",
    "history_start",
    "migrate",
    "prune_history",
]

_WHERE = {
    "PROJECTED_TABLES": ("projection", "PROJECTED_TABLES"),
    "MemoryQueries": ("queries", "MemoryQueries"),
    "ReadModelProjection": ("projection", "ReadModelProjection"),
    "checksum": ("projection", "checksum"),
    "connect": ("database", "connect"),
    "create_pool": ("database", "create_pool"),
    "history_start": ("history", "history_start"),
    "migrate": ("database", "migrate"),
    "prune_history": ("history", "prune"),
}


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
