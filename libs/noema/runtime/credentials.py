"""The NATS credentials of one data folder: generated at first start, kept in ``nats-auth.json``
(mode 0600, reused on every restart), and the agents an operator added with ``noemactl agent add``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from dataclasses import field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from noema.records import dataclass
from noema.runtime.identities import (
    OPERATOR,
    SERVICES,
    Identity,
    agent_identity,
    agent_user,
    service_identity,
    service_user,
)
from noema.topology import Topology

__all__ = [
    "AgentRecord",
    "CredentialStore",
    "redact_url",
    "url_with_credentials",
    "write_private",
]

_FILE = "nats-auth.json"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, readable by its owner only (0600 from the start: the
    file never exists with wider permissions, not even for a moment)."""
    tmp = path.with_name(path.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)


def url_with_credentials(url: str, user: str, password: str) -> str:
    """``url`` carrying ``user`` and ``password`` (``nats://user:password@host:port``), which every
    NATS client understands; a comma-separated list of servers (a cluster) gets them on each."""
    if "," in url:
        return ",".join(url_with_credentials(one, user, password) for one in url.split(","))
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def redact_url(url: str | None) -> str:
    """``url`` with any password replaced by ``***``: for logs, status lines and error messages."""
    if not url:
        return ""
    out = []
    for one in url.split(","):
        parts = urlsplit(one)
        if parts.password is None:
            out.append(one)
            continue
        netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        out.append(urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)))
    return ",".join(out)


@dataclass(frozen=True)
class AgentRecord:
    """One agent's NATS identity, as ``noemactl agent add`` recorded it."""

    workspace: str
    agent: str
    role: str
    password: str = field(repr=False)
    prefix: str = "noema"
    """The subject prefix its permissions are for (``NOEMA_PREFIX`` when it was added)."""

    @property
    def user(self) -> str:
        """Its NATS user name."""
        return agent_user(self.workspace, self.agent)


class CredentialStore:
    """Passwords of the services, the operator and the agents of one data folder."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / _FILE
        self._data = self._load()

    def _load(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.path.read_text())
        except FileNotFoundError:
            data = {}
        except ValueError as exc:
            raise RuntimeError(f"{self.path} is not valid JSON ({exc}); restore it or delete it") from None
        data.setdefault("services", {})
        data.setdefault("agents", {})
        changed = False
        for name in (*SERVICES, OPERATOR):
            if name not in data["services"]:
                data["services"][name] = secrets.token_urlsafe(24)
                changed = True
        if changed or not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_private(self.path, json.dumps(data, indent=2))
        return data

    def _save(self) -> None:
        write_private(self.path, json.dumps(self._data, indent=2))

    def route_password(self) -> str:
        """The password the servers of an embedded cluster use on their routes to one another
        (created on first use; no client identity has it)."""
        if "cluster_routes" not in self._data:
            self._data["cluster_routes"] = secrets.token_urlsafe(24)
            self._save()
        return str(self._data["cluster_routes"])

    def password(self, name: str) -> str:
        """The password of a service (or of the operator)."""
        return str(self._data["services"][name])

    def service_url(self, url: str, name: str) -> str:
        """``url`` with the credentials of service ``name`` (or of the operator)."""
        return url_with_credentials(url, service_user(name), self.password(name))

    def agents(self) -> list[AgentRecord]:
        """Every recorded agent, by workspace then agent."""
        records = [AgentRecord(**r) for r in self._data["agents"].values()]
        return sorted(records, key=lambda r: (r.workspace, r.agent))

    def add_agent(self, workspace: str, agent: str, role: str, prefix: str = "noema") -> AgentRecord:
        """Record (or replace, with a new password) the identity of ``agent`` in ``workspace``."""
        record = AgentRecord(workspace, agent, role, secrets.token_urlsafe(24), prefix)
        self._data["agents"][record.user] = record.__dict__
        self._save()
        return record

    def remove_agent(self, workspace: str, agent: str) -> bool:
        """Forget an agent's identity; False when there was none."""
        found = self._data["agents"].pop(agent_user(workspace, agent), None) is not None
        if found:
            self._save()
        return found

    def identities(self, topology: Topology) -> list[Identity]:
        """Every identity to configure the server with (the services' for ``topology``, each agent's
        for the prefix it was added with)."""
        out = [service_identity(name, self.password(name), topology) for name in (*SERVICES, OPERATOR)]
        out += [
            agent_identity(r.workspace, r.agent, r.role, r.password, Topology(r.prefix))
            for r in self.agents()
        ]
        return out
