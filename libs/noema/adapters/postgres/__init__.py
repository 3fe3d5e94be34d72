"""PostgreSQL adapter: migrations, the projection, read queries and checksums (asyncpg)."""

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
