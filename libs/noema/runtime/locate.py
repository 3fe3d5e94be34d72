"""Finding the running instance: every command uses the same data folder / settings as ``up``.

``up`` records its state in its data folder (``noema.json``) and, so that a command started in
another working directory finds it too (an MCP host starts its servers wherever it likes), registers
the folder under the user's state directory (:func:`registry_dir`). A command given no data folder
(neither ``--data-dir`` nor ``NOEMA_DATA_DIR``) that finds nothing in ``./var`` uses the one instance
registered there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from noema.errors import Kind, NoemaError
from noema.runtime.credentials import CredentialStore, url_with_credentials, write_private
from noema.runtime.identities import OPERATOR
from noema.runtime.settings import DEFAULT_DATA_DIR, Located, Settings

__all__ = [
    "NotRunning",
    "locate",
    "nats_fields",
    "read_state",
    "register",
    "registered",
    "registry_dir",
    "state_nats_url",
    "state_path",
    "unregister",
    "write_state",
]


class NotRunning(NoemaError, RuntimeError):
    """No running Noema was found for these settings; the message says how to start one."""

    kind = Kind.UNAVAILABLE


def state_path(data_dir: Path) -> Path:
    """Where ``noemactl up`` records the addresses of the instance it runs."""
    return data_dir / "noema.json"


def write_state(data_dir: Path, state: dict[str, Any]) -> None:
    """Record the running instance's addresses (atomically, readable by its owner only: it holds
    the operator's NATS credentials)."""
    write_private(state_path(data_dir), json.dumps(state, indent=2))


def nats_fields(url: str) -> dict[str, str | None]:
    """How ``noema.json`` records a NATS URL that may carry credentials: ``nats_url`` without them
    (a comma-separated list for a cluster), ``nats_user`` and ``nats_password`` beside it (None
    when it had none). Clients that refuse credentials in a URL (nats.js) take the fields as their
    options; every NATS client does."""
    user = password = None
    plain = []
    for one in url.split(","):
        parts = urlsplit(one)
        if parts.username is not None:
            user, password = unquote(parts.username), unquote(parts.password or "")
        netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port is not None else "")
        plain.append(urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)))
    return {"nats_url": ",".join(plain), "nats_user": user, "nats_password": password}


def state_nats_url(state: Mapping[str, Any]) -> str:
    """The NATS URL of a recorded state with its credentials in it (what Noema's own connections
    take): ``nats_url`` plus ``nats_user``/``nats_password``, or the URL alone as a ``noema.json``
    written before the fields (whose URL carried them) has it."""
    url = str(state["nats_url"])
    user, password = state.get("nats_user"), state.get("nats_password")
    return url_with_credentials(url, str(user), str(password or "")) if user else url


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


def registry_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where ``up`` registers the data folders of the instances it runs:
    ``$XDG_STATE_HOME/noema/instances`` (default ``~/.local/state/noema/instances``). Not under
    ``$XDG_RUNTIME_DIR``: MCP hosts start their servers with a minimal environment (``HOME``,
    ``PATH``, ``USER`` …) that lacks it."""
    env = os.environ if env is None else env
    state_home = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
    return Path(state_home) / "noema" / "instances"


def _entry(registry: Path, data_dir: Path) -> Path:
    return registry / f"{hashlib.sha256(str(data_dir).encode()).hexdigest()[:16]}.json"


def register(registry: Path, data_dir: Path) -> None:
    """Record that the ``up`` of this process runs in ``data_dir`` (an absolute path)."""
    registry.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_private(_entry(registry, data_dir), json.dumps({"data_dir": str(data_dir), "pid": os.getpid()}))


def unregister(registry: Path, data_dir: Path) -> None:
    """Remove the record of ``data_dir`` (when ``up`` stops)."""
    with contextlib.suppress(OSError):
        _entry(registry, data_dir).unlink()


def registered(registry: Path | None = None) -> list[Path]:
    """The data folders of the registered instances that still run (sorted); records of stopped
    ones are removed on the way."""
    registry = registry_dir() if registry is None else registry
    found = []
    for entry in sorted(registry.glob("*.json")) if registry.is_dir() else []:
        try:
            record = json.loads(entry.read_text())
            data_dir = Path(record["data_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        state = read_state(data_dir)
        if state is not None and state.get("pid") == record.get("pid"):
            found.append(data_dir)
        elif state is None:
            with contextlib.suppress(OSError):
                entry.unlink()
    return sorted(found)


def _running_data_dir(settings: Settings) -> tuple[Path, dict[str, Any]]:
    """The data folder of the instance these settings mean, and its state."""
    data_dir = settings.data_dir.expanduser().resolve()
    state = read_state(data_dir)
    if state is not None:
        return data_dir, state
    elsewhere = registered() if settings.data_dir == DEFAULT_DATA_DIR else []
    if len(elsewhere) == 1 and (state := read_state(elsewhere[0])) is not None:
        return elsewhere[0], state
    hint = (
        "start it with `noemactl up` (or `make run`); if it runs with another data folder, name that "
        "folder with --data-dir or NOEMA_DATA_DIR; or set NOEMA_NATS_URL and NOEMA_DATABASE_URL to "
        "use external servers"
    )
    if len(elsewhere) > 1:
        folders = ", ".join(map(str, elsewhere))
        hint = f"several run elsewhere ({folders}): name one with --data-dir or NOEMA_DATA_DIR"
    raise NotRunning(f"no running Noema found in {data_dir} — {hint}")


def locate(settings: Settings, identity: str = OPERATOR) -> Located:
    """Settings with server URLs: the configured ones, else those of the ``up`` in the data folder
    — or, given no data folder, of the one ``up`` registered elsewhere (:class:`NotRunning` when
    none runs there). The located settings name the data folder found, as an absolute path.

    On the embedded NATS the URL carries credentials: the operator's, or those of the Noema process
    ``identity`` (e.g. ``mcp``), from the data folder's credentials.
    """
    if settings.external:
        return Located.of(settings)
    data_dir, state = _running_data_dir(settings)
    settings = replace(settings, data_dir=data_dir)
    nats_url = settings.nats_url or state_nats_url(state)
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
