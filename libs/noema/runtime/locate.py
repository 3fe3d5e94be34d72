"""Finding the running instance: every command uses the same data folder / settings as ``up``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from noema.errors import Kind, NoemaError
from noema.runtime.credentials import CredentialStore, write_private
from noema.runtime.identities import OPERATOR
from noema.runtime.settings import Located, Settings

__all__ = ["NotRunning", "locate", "read_state", "state_path", "write_state"]


class NotRunning(NoemaError, RuntimeError):
    """No running Noema was found for these settings; the message says how to start one."""

    kind = Kind.UNAVAILABLE


def state_path(data_dir: Path) -> Path:
    """Where ``noemactl up`` records the addresses of the instance it runs."""
    return data_dir / "noema.json"


def write_state(data_dir: Path, state: dict[str, Any]) -> None:
    """Record the running instance's addresses (atomically, readable by its owner only: the NATS
    URL carries the operator's credentials)."""
    write_private(state_path(data_dir), json.dumps(state, indent=2))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_state(data_dir: Path) -> dict[str, Any] | None:
    """The state of a live ``up`` in ``data_dir``, or None (a stale file is ignored)."""
    path = state_path(data_dir)
    if not path.exists():
        return None
    try:
        state: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not _alive(int(state.get("pid", 0)) or -1):
        return None
    return state


def locate(settings: Settings, identity: str = OPERATOR) -> Located:
    """Settings with server URLs: the configured ones, else those of the ``up`` in the data folder
    (:class:`NotRunning` when none runs there).

    On the embedded NATS the URL carries credentials: the operator's, or those of the Noema process
    ``identity`` (e.g. ``mcp``), from the data folder's credentials.
    """
    if settings.external:
        return Located.of(settings)
    data_dir = settings.data_dir.expanduser().resolve()
    state = read_state(data_dir)
    if state is None:
        raise NotRunning(
            f"no running Noema found in {settings.data_dir} — start it with `noemactl up` "
            "(or `make run`), or set NOEMA_NATS_URL and NOEMA_DATABASE_URL to use external servers"
        )
    nats_url = settings.nats_url or str(state["nats_url"])
    if settings.nats_url is None and identity != OPERATOR and state.get("nats_plain_url"):
        nats_url = CredentialStore(data_dir).service_url(str(state["nats_plain_url"]), identity)
    # An embedded instance records one URL per database role (noema.adapters.postgres.roles).
    roles = {} if settings.database_url else (state.get("database_urls") or {})
    return settings.with_urls(
        nats_url,
        settings.database_url or str(roles.get("owner") or state["database_url"]),
        projector_url=roles.get("projector"),
        reader_url=roles.get("reader"),
    )
