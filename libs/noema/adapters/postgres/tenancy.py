"""Which workspace a connection may see under row-level security (migration 0006).

The policies compare each row's workspace with the setting ``noema.workspace``: ``"*"`` is every
workspace, ``""`` (or unset) none, anything else that one workspace. A pool gets a default at
connection start (:func:`noema.adapters.postgres.create_pool` ``workspace=``); a request acting for
one workspace narrows it with :func:`workspace_scope`, which every connection acquired from such a
pool inside the ``with`` block then carries (asyncpg resets it to the default on release).

This is defence in depth under the queries' own ``workspace = $n`` conditions, against a query that
forgets one; it is no barrier against SQL an attacker can run (the setting is the session's own).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import asyncpg

__all__ = [
    "ALL_WORKSPACES",
    "NO_WORKSPACE",
    "SETTING",
    "apply_scope",
    "current_scope",
    "workspace_scope",
]

SETTING = "noema.workspace"
"""The PostgreSQL setting the row-security policies read."""
ALL_WORKSPACES = "*"
NO_WORKSPACE = ""

_SCOPE: ContextVar[str | None] = ContextVar("noema_workspace_scope", default=None)


@contextlib.contextmanager
def workspace_scope(workspace: str) -> Iterator[None]:
    """Inside the block, connections acquired from a Noema pool see only ``workspace``
    (:data:`ALL_WORKSPACES` for every one, :data:`NO_WORKSPACE` for none)."""
    token = _SCOPE.set(workspace)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def current_scope() -> str | None:
    """The workspace the current block is scoped to (None outside any :func:`workspace_scope`)."""
    return _SCOPE.get()


async def apply_scope(conn: asyncpg.Connection, default: str | None = None) -> None:
    """Pool ``setup`` hook: give a connection being acquired the current block's scope, if any
    (nothing to do when it is the pool's ``default``, which a released connection is reset to)."""
    scope = _SCOPE.get()
    if scope is not None and scope != default:
        await conn.execute(f"SELECT set_config('{SETTING}', $1, false)", scope)
