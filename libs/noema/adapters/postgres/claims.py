"""A claim as a PostgreSQL session advisory lock (:class:`noema.ports.Claim`).

The lock is taken on a connection the owner holds from its pool for as long as it works. It ends
with the session: when the owner's process dies (SIGKILL, a crash, a lost host once TCP keepalive
notices) PostgreSQL ends the session and a standby's next try takes the lock. A standby tries every
``poll_s`` (non-blocking, so it stops at once when asked to).

Fencing: the projector writes its rows and its position *on the claim's connection*
(:meth:`AdvisoryClaim.connection`), so every write happens in the session that holds the lock — a
former owner whose session was ended cannot commit anything. :meth:`AdvisoryClaim.check` asks the
server whether this session still holds the lock (``pg_locks``), for the workers that write
elsewhere (to NATS).

Keys are ``hashtext('noema-claim:<schema>:<worker>')`` and the partition, so instances on another
schema of the same database (tests, projection versions) never contend.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
import structlog

from noema.adapters.errors import broken_connection
from noema.ports import ClaimLost, ClaimState

__all__ = ["GIVE_BACK_S", "KEEPALIVE_SQL", "AdvisoryClaim", "AdvisoryPartitions", "claim_key"]

log = structlog.get_logger("noema.claims")

_HELD_SQL = """
SELECT EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid()
      AND classid = ((hashtext($1)::bigint + 4294967296) % 4294967296)::oid
      AND objid = $2::bigint::oid AND objsubid = 2
)
"""


_LOCKS_SQL = """
SELECT objid::bigint AS partition, mode, pid, pid = pg_backend_pid() AS mine FROM pg_locks
WHERE locktype = 'advisory' AND granted AND objsubid = 2
  AND classid = ((hashtext($1)::bigint + 4294967296) % 4294967296)::oid
"""

_PARTITIONED_SQL = """
SELECT EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 2
      AND classid = ((hashtext($1)::bigint + 4294967296) % 4294967296)::oid
)
"""
"""Whether any instance of the worker runs partitioned (holds a members' lock of any count)."""


GIVE_BACK_S = 5.0
"""How long giving the claim's connection back may take before it is terminated."""

# A vanished owner *host* frees the lock once 5 + 3 x 2 = 11 s of TCP keepalive go unanswered
# (ignored on a Unix socket; a dead process frees it at once either way).
KEEPALIVE_SQL = "SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3"


def _closed(conn: asyncpg.Connection) -> bool:
    """Whether the session is gone (the pool releases a connection of a terminated session itself)."""
    try:
        return bool(conn.is_closed())
    except asyncpg.InterfaceError:
        return True


def claim_key(schema: str, worker: str) -> str:
    """The text whose hash is the lock's first key (the partition is the second)."""
    return f"noema-claim:{schema}:{worker}"


class AdvisoryClaim:
    """One partition's claim among the instances of ``worker``, held on a connection of ``pool``."""

    def __init__(
        self, pool: asyncpg.Pool, schema: str, worker: str, partition: int = 0, *, poll_s: float = 0.5
    ) -> None:
        self._pool = pool
        self._key = claim_key(schema, worker)
        self._members_key = claim_key(schema, f"{worker}-members")
        self._partition = partition
        self._poll_s = poll_s
        self._conn: asyncpg.Connection | None = None
        self._state: ClaimState = "standby"
        # One statement at a time on the held connection: the watcher's check and the owner's writes.
        self._lock = asyncio.Lock()

    @property
    def state(self) -> ClaimState:
        """``standby``, ``owner`` or ``lost``."""
        return self._state

    async def acquire(self, stopping: asyncio.Event) -> bool:
        """Try the lock every ``poll_s`` on a held connection until it is ours or ``stopping``."""
        conn = self._conn = await self._pool.acquire()
        while not stopping.is_set():
            # Not while instances of a partitioned layout run (NOEMA_PARTITIONS changed, a rollout
            # under way): they may own the other partitions, and would decide the same workspaces.
            partitioned = await conn.fetchval(_PARTITIONED_SQL, self._members_key)
            if not partitioned and await conn.fetchval(
                "SELECT pg_try_advisory_lock(hashtext($1), $2)", self._key, self._partition
            ):
                if await conn.fetchval(_PARTITIONED_SQL, self._members_key):  # one joined meanwhile
                    await conn.fetchval(
                        "SELECT pg_advisory_unlock(hashtext($1), $2)", self._key, self._partition
                    )
                    continue
                # The server notices a vanished owner host this soon (a dead process at once).
                await conn.execute(KEEPALIVE_SQL)
                self._state = "owner"
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self._poll_s)
        await self._give_back()
        return False

    def _lose(self, reason: str) -> ClaimLost:
        if self._state == "owner":
            log.error("claim lost", claim=self._key, partition=self._partition, reason=reason)
        self._state = "lost"
        return ClaimLost(f"claim {self._key}/{self._partition} lost: {reason}")

    async def check(self) -> None:
        """Raise :class:`ClaimLost` unless this session still holds the lock."""
        async with self.connection() as conn:
            held = await conn.fetchval(_HELD_SQL, self._key, self._partition)
        if not held:
            raise self._lose("the lock is no longer held by this session")

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """The claim's own connection, for writes that must come from the owner (one user at a time).

        Raises :class:`ClaimLost` before, or instead of any error from the body, once the session is
        gone: whatever the body wrote in a transaction there was rolled back with it."""
        async with self._lock:
            conn = self._conn
            if self._state != "owner" or conn is None:
                raise self._lose(f"not the owner ({self._state})")
            if _closed(conn):
                raise self._lose("its connection is closed")
            try:
                yield conn
            except (asyncpg.PostgresConnectionError, asyncpg.InterfaceError, OSError) as exc:
                if _closed(conn) or isinstance(exc, asyncpg.PostgresConnectionError):
                    raise self._lose(f"{type(exc).__name__}: {exc}") from exc
                raise
            except asyncpg.AdminShutdownError as exc:  # pg_terminate_backend, or a server shutdown
                raise self._lose(f"{type(exc).__name__}: {exc}") from exc
            except asyncpg.InternalClientError as exc:
                if broken_connection(exc):  # the session's state is unknown: not ours to write on
                    conn.terminate()
                    raise self._lose(f"{type(exc).__name__}: {exc}") from exc
                raise

    async def release(self) -> None:
        """Unlock (when still the owner) and give the connection back to the pool: at a clean stop,
        and after the claim was lost (so the pool can close)."""
        if self._state == "owner" and self._conn is not None and not _closed(self._conn):
            with contextlib.suppress(Exception):
                async with self._lock:
                    await self._conn.fetchval(
                        "SELECT pg_advisory_unlock(hashtext($1), $2)",
                        self._key,
                        self._partition,
                        timeout=GIVE_BACK_S,
                    )
        self._state = "lost"
        await self._give_back()

    async def _give_back(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            # A session the server ended is terminated by the pool (which frees its holder); a
            # release that cannot finish (the server gone mid-reset) ends the connection instead.
            await asyncio.wait_for(self._pool.release(conn), GIVE_BACK_S)
        except Exception:
            with contextlib.suppress(Exception):
                conn.terminate()


class AdvisoryPartitions:
    """The ``partitions`` partitions of ``worker`` (:class:`noema.runtime.partitions.PartitionClaims`),
    all on one connection of ``pool`` held from :meth:`join` to :meth:`leave`: membership is a
    shared lock on (``<worker>-members``, the partition count), ownership of partition p the
    exclusive lock an :class:`AdvisoryClaim` of partition p takes. A session that ends — the
    process died, or its host vanished and TCP keepalive noticed — frees all of them.

    Instances of another partition count (a rollout changing ``NOEMA_PARTITIONS``) are told apart:
    members of another count, or an unpartitioned instance's claim (a partition lock held by no
    member of this count) — :meth:`others`."""

    def __init__(self, pool: asyncpg.Pool, schema: str, worker: str, partitions: int) -> None:
        self._pool = pool
        self._partitions = partitions
        self._key = claim_key(schema, worker)
        self._members_key = claim_key(schema, f"{worker}-members")
        self._conn: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()  # one statement at a time on the held connection

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[asyncpg.Connection]:
        async with self._lock:
            conn = self._conn
            if conn is None or _closed(conn):
                raise ClaimLost(f"claims {self._key}: the session holding them is gone")
            try:
                yield conn
            except (asyncpg.PostgresConnectionError, asyncpg.InterfaceError, OSError) as exc:
                if _closed(conn) or isinstance(exc, asyncpg.PostgresConnectionError):
                    raise ClaimLost(f"claims {self._key} lost: {type(exc).__name__}: {exc}") from exc
                raise
            except asyncpg.AdminShutdownError as exc:
                raise ClaimLost(f"claims {self._key} lost: {type(exc).__name__}: {exc}") from exc

    async def join(self) -> None:
        """Hold a connection and the members' shared lock."""
        self._conn = await self._pool.acquire()
        async with self._session() as conn:
            await conn.execute(KEEPALIVE_SQL)
            await conn.execute(
                "SELECT pg_advisory_lock_shared(hashtext($1), $2)", self._members_key, self._partitions
            )

    async def _members(self, conn: asyncpg.Connection) -> dict[int, set[int]]:
        """The sessions (pids) holding the members' lock, by partition count."""
        found: dict[int, set[int]] = {}
        for r in await conn.fetch(_LOCKS_SQL, self._members_key):
            if r["mode"] == "ShareLock":
                found.setdefault(int(r["partition"]), set()).add(int(r["pid"]))
        return found

    async def members(self) -> int:
        """Sessions that are members of this partition count (this one included)."""
        async with self._session() as conn:
            return max(1, len((await self._members(conn)).get(self._partitions, set())))

    async def others(self) -> int:
        """Sessions working another partition count: its members, or the holder of an
        unpartitioned claim (a partition lock of no member of this count)."""
        async with self._session() as conn:
            members = await self._members(conn)
            ours = members.pop(self._partitions, set())
            claims = await conn.fetch(_LOCKS_SQL, self._key)
        strangers = {int(r["pid"]) for r in claims if r["mode"] == "ExclusiveLock"} - ours
        return len(strangers.union(*members.values()))

    async def try_claim(self, partition: int) -> bool:
        """Take partition ``partition``'s lock if it is free."""
        async with self._session() as conn:
            return bool(
                await conn.fetchval("SELECT pg_try_advisory_lock(hashtext($1), $2)", self._key, partition)
            )

    async def held(self) -> set[int]:
        """The partitions whose lock this session holds."""
        async with self._session() as conn:
            rows = await conn.fetch(_LOCKS_SQL, self._key)
        return {int(r["partition"]) for r in rows if r["mine"] and r["mode"] == "ExclusiveLock"}

    async def check(self, partition: int) -> None:
        """Raise :class:`ClaimLost` unless this session holds ``partition``'s lock."""
        async with self._session() as conn:
            held = await conn.fetchval(_HELD_SQL, self._key, partition)
        if not held:
            raise ClaimLost(f"claim {self._key}/{partition} lost: the lock is no longer held by this session")

    async def release(self, partition: int) -> None:
        """Unlock ``partition``."""
        async with self._session() as conn:
            await conn.fetchval("SELECT pg_advisory_unlock(hashtext($1), $2)", self._key, partition)

    async def leave(self) -> None:
        """Unlock everything and give the connection back."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if not _closed(conn):
                async with self._lock:
                    await conn.execute("SELECT pg_advisory_unlock_all()", timeout=GIVE_BACK_S)
            await asyncio.wait_for(self._pool.release(conn), GIVE_BACK_S)
        except Exception:  # the session is gone or hangs: ending it frees every lock it held
            with contextlib.suppress(Exception):
                conn.terminate()
