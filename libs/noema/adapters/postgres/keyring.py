"""The keyring in PostgreSQL (migration 0013): one data key per item, the links that say which
subjects and sources each key answers for, and tombstones for destroyed keys.

Keys are created before the events sealed under them are published (:meth:`PostgresKeyring.ensure`
commits first), so no stored event names a key that was never stored. A destroyed key keeps its row
with the key set to NULL: ``ensure`` then answers None and nothing new is sealed under an erased item.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg

from noema.domain.sealing import KeyBytes, new_key, open_text, sealed_key_id

if TYPE_CHECKING:  # an annotation: what opens rows (a read of memory) needs none of the sealed events
    from noema.domain.sealed_events import KeyRequest

__all__ = ["PostgresKeyring", "destroy_keys", "lookup_keys", "opened_rows"]


async def lookup_keys(conn: asyncpg.Connection, key_ids: Collection[str]) -> dict[str, KeyBytes]:
    """The keys by id (None for destroyed ones); ids never stored are absent."""
    rows = await conn.fetch(
        "SELECT key_id, key FROM noema_keyring.data_keys WHERE key_id = ANY($1::text[])", list(key_ids)
    )
    return {r["key_id"]: (bytes(r["key"]) if r["key"] is not None else None) for r in rows}


async def destroy_keys(
    conn: asyncpg.Connection, key_ids: Sequence[str], erasure_id: str, at: datetime
) -> None:
    """Destroy keys for good (idempotent; a key destroyed earlier keeps its first erasure)."""
    await conn.execute(
        """UPDATE noema_keyring.data_keys SET key = NULL, destroyed_at = $3, erasure_id = $2
           WHERE key_id = ANY($1::text[]) AND destroyed_at IS NULL""",
        list(key_ids),
        erasure_id,
        at,
    )


class PostgresKeyring:
    """:class:`noema.ports.Keyring` on a connection pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def ensure(self, requests: Sequence[KeyRequest]) -> dict[str, KeyBytes]:
        """The key of each request, created with its links when new (one transaction)."""
        if not requests:
            return {}
        merged: dict[str, KeyRequest] = {}
        for r in requests:
            merged[r.key_id] = merged[r.key_id].joined(r) if r.key_id in merged else r
        ids = sorted(merged)  # keys locked in one order: concurrent writers cannot deadlock
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.executemany(
                """INSERT INTO noema_keyring.data_keys (key_id, workspace, key) VALUES ($1, $2, $3)
                   ON CONFLICT (key_id) DO NOTHING""",
                [(k, merged[k].workspace, new_key()) for k in ids],
            )
            rows = await conn.fetch(
                "SELECT key_id, workspace, key FROM noema_keyring.data_keys WHERE key_id = ANY($1::text[])",
                ids,
            )
            # A key is its workspace's: an item of another workspace that names the same id (an
            # agent there reused an observation id) gets no key — its content is written as
            # erased — so it is never sealed under, linked to or erased with this one's.
            own = {r["key_id"] for r in rows if r["workspace"] == merged[r["key_id"]].workspace}
            links = [
                (merged[k].workspace, kind, value, k)
                for k in ids
                if k in own
                for kind, values in (("subject", merged[k].subjects), ("source", merged[k].sources))
                for value in values
            ]
            if links:
                await conn.executemany(
                    """INSERT INTO noema_keyring.key_links (workspace, kind, value, key_id)
                       VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING""",
                    links,
                )
            return {
                r["key_id"]: (bytes(r["key"]) if r["key"] is not None and r["key_id"] in own else None)
                for r in rows
            }

    async def lookup(self, key_ids: Collection[str]) -> dict[str, KeyBytes]:
        if not key_ids:
            return {}
        async with self._pool.acquire() as conn:
            return await lookup_keys(conn, key_ids)

    async def linked(self, workspace: str, kind: str, values: Collection[str]) -> set[str]:
        """The ids of the keys linked to any of ``values`` as ``kind`` (subject or source)."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                """SELECT key_id FROM noema_keyring.key_links
                   WHERE workspace = $1 AND kind = $2 AND value = ANY($3::text[])""",
                workspace,
                kind,
                list(values),
            )
        return {r["key_id"] for r in rows}

    async def existing(self, workspace: str, key_ids: Collection[str], live: bool = False) -> set[str]:
        """Which of ``key_ids`` are keys of ``workspace`` (destroyed or not; only those not
        destroyed yet with ``live``)."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                """SELECT key_id FROM noema_keyring.data_keys
                   WHERE workspace = $1 AND key_id = ANY($2::text[]) AND (NOT $3 OR key IS NOT NULL)""",
                workspace,
                list(key_ids),
                live,
            )
        return {r["key_id"] for r in rows}

    async def subjects(self, workspace: str, key_id: str) -> list[str]:
        """The subjects the content under ``key_id`` is about (what a copy of it must carry)."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                """SELECT value FROM noema_keyring.key_links
                   WHERE workspace = $1 AND kind = 'subject' AND key_id = $2 ORDER BY value""",
                workspace,
                key_id,
            )
        return [r["value"] for r in rows]

    async def sources_of(self, workspace: str, key_ids: Collection[str]) -> list[str]:
        """The items (observations, memories) the keys' content came from."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                """SELECT DISTINCT value FROM noema_keyring.key_links
                   WHERE workspace = $1 AND kind = 'source' AND key_id = ANY($2::text[])""",
                workspace,
                list(key_ids),
            )
        return sorted(r["value"] for r in rows)

    async def memories(self, workspace: str, ids: Collection[str], erased: bool = True) -> list[str]:
        """Which of ``ids`` are memories in the live read model (a memory's key is its id); without
        ``erased``, only those not erased yet."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT id FROM memories WHERE workspace = $1 AND id = ANY($2::text[]) "
                "AND ($3 OR erased_at IS NULL)",
                workspace,
                list(ids),
                erased,
            )
        return sorted(r["id"] for r in rows)


_SEALED_VECTOR = re.compile(r'"sealed_vector": "(nsl1:[^"]*)"')
_SEALED = re.compile(r'"(nsl1:[^"]*)"')


async def opened_rows(pool: asyncpg.Pool, found: Sequence[asyncpg.Record]) -> list[dict[str, Any]]:
    """Event rows (``payload`` as JSON text) as a reader is shown them: each sealed string opened
    with its key, erased ones empty; a sealed vector is shown as ``"sealed"`` (or empty once erased),
    not as its numbers."""
    rows = [dict(r) for r in found]
    ids = {
        k
        for r in rows
        for m in _SEALED.finditer(r["payload"])
        if (k := sealed_key_id(m.group(1))) is not None
    }
    if not ids:
        return rows
    async with pool.acquire() as conn:
        keys = await lookup_keys(conn, ids)

    def vector(m: re.Match[str]) -> str:
        key = keys.get(sealed_key_id(m.group(1)) or "")
        return f'"sealed_vector": "{"sealed" if key is not None else ""}"'

    def text(m: re.Match[str]) -> str:
        return json.dumps(open_text(m.group(1), keys), ensure_ascii=False)

    for r in rows:
        r["payload"] = _SEALED.sub(text, _SEALED_VECTOR.sub(vector, r["payload"]))
    return rows
