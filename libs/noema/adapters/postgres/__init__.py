"""PostgreSQL adapter: migrations, the projection, read queries and checksums (asyncpg)."""

from .database import connect, create_pool, migrate
from .projection import PROJECTED_TABLES, ReadModelProjection, checksum
from .queries import MemoryQueries

__all__ = [
    "PROJECTED_TABLES",
    "MemoryQueries",
    "ReadModelProjection",
    "checksum",
    "connect",
    "create_pool",
    "migrate",
]
