"""A whole Noema for a benchmark: `noemactl up` as a subprocess on a temporary data folder.

Exactly what a user runs — the embedded NATS and PostgreSQL, every worker and the HTTP API as
separate processes under the real supervisor — so a benchmark measures the product, and finds its
addresses and credentials where every `noemactl` command does: in the data folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from noema.runtime.embedded import die_with_parent, free_port
from noema.runtime.locate import read_state, state_nats_url
from noema_api.auth import operator_token

__all__ = ["Instance", "running_instance"]

START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Instance:
    """A running `noemactl up`: where to reach it, as its operator."""

    data_dir: Path
    api_url: str
    token: str
    nats_url: str
    """With the operator's NATS credentials (as in ``noema.json``)."""
    owner_db_url: str
    """The schema owner's PostgreSQL URL (sees every workspace's rows)."""
    up_pid: int
    log: Path
    pids: dict[str, int]
    """Process ids: every service `up` runs (by name), ``nats`` and ``postgres`` (the postmaster)."""


def _pids(up_pid: int, data_dir: Path, services: dict[str, int]) -> dict[str, int]:
    pids = {str(name): int(pid) for name, pid in services.items()}
    for child in psutil.Process(up_pid).children():
        if child.name() == "nats-server":
            pids["nats"] = child.pid
    with contextlib.suppress(OSError, ValueError, IndexError):
        pids["postgres"] = int((data_dir / "pg" / "postmaster.pid").read_text().splitlines()[0])
    return pids


def _wait_ready(up: subprocess.Popen[bytes], data_dir: Path, log: Path) -> Instance:
    """Poll until ``noema.json`` exists and ``/readyz`` answers 200 (bounded; the log tail on failure)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    last = "noema.json not written yet"
    while time.monotonic() < deadline:
        if up.poll() is not None:
            break
        state = read_state(data_dir)
        if state is not None:
            try:
                ready = httpx.get(f"{state['api_url']}/readyz", timeout=5)
                if ready.status_code == 200:
                    return Instance(
                        data_dir=data_dir,
                        api_url=str(state["api_url"]),
                        token=operator_token(data_dir / "api-tokens.json")[1],
                        nats_url=state_nats_url(state),
                        owner_db_url=str(state["database_urls"]["owner"]),
                        up_pid=up.pid,
                        log=log,
                        pids=_pids(up.pid, data_dir, state["services"]),
                    )
                last = f"/readyz {ready.status_code}: {ready.text[:300]}"
            except httpx.HTTPError as exc:
                last = f"/readyz: {type(exc).__name__}"
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise RuntimeError(
        f"noemactl up was not ready within {START_TIMEOUT_S:.0f}s "
        f"(exit code {up.poll()}; last: {last})\n--- {log} (tail) ---\n{tail}"
    )


def _stop(up: subprocess.Popen[bytes], data_dir: Path) -> None:
    """SIGINT to `up` (it stops the workers, NATS, then PostgreSQL), then make sure nothing of it
    is left: its remaining children, and the PostgreSQL postmaster (not `up`'s child) by its pid."""
    try:
        children = psutil.Process(up.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    if up.poll() is None:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print("noemactl up did not stop in time; killing it", file=sys.stderr)
            up.kill()
            up.wait()
    _, alive = psutil.wait_procs(children, timeout=10)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    postmaster = data_dir / "pg" / "postmaster.pid"
    with contextlib.suppress(OSError, ValueError, IndexError, psutil.NoSuchProcess):
        pid = int(postmaster.read_text().splitlines()[0])
        pg = psutil.Process(pid)
        if "postgres" in pg.name():
            print(f"PostgreSQL {pid} still running after up stopped; stopping it", file=sys.stderr)
            pg.send_signal(signal.SIGINT)  # fast shutdown
            pg.wait(30)


@contextlib.contextmanager
def running_instance(
    extra_env: Mapping[str, str] | None = None, prepare: Callable[[Path], None] | None = None
) -> Iterator[Instance]:
    """`noemactl up` in a fresh folder under /tmp, ready; stopped and removed on exit (also on
    Ctrl-C or an error). ``extra_env`` adds ``NOEMA_*`` settings for every process; ``prepare``
    is called with the data folder before `up` starts."""
    base = Path(tempfile.mkdtemp(prefix="noema-load-", dir="/tmp"))
    base.chmod(0o755)  # the embedded PostgreSQL may run as another user that must reach it
    data_dir, runtime, log = base / "var", base / "run", base / "up.log"
    runtime.mkdir(mode=0o700)
    if prepare is not None:
        try:
            prepare(data_dir)
        except BaseException:
            shutil.rmtree(base, ignore_errors=True)
            raise
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    env.update(
        NOEMA_DATA_DIR=str(data_dir),
        NOEMA_API_PORT=str(free_port()),
        NOEMA_LOG_FORMAT="json",
        NOEMA_LOG_LEVEL="warning",
        # A benchmark's one token or agent stands for many callers: no per-caller limits
        # (bench/admission.py measures them, in-process).
        NOEMA_RATE_LIMIT="0",
        NOEMA_CONCURRENCY_LIMIT="0",
        XDG_RUNTIME_DIR=str(runtime),
    )
    env.update(extra_env or {})  # may override the defaults above (e.g. NOEMA_LOG_LEVEL)
    with log.open("wb") as out:
        # Own session: a Ctrl-C in the terminal reaches this process only, which then stops `up`
        # in order; die_with_parent: a killed benchmark still takes `up` (and all below it) down.
        up = subprocess.Popen(
            [sys.executable, "-m", "noema_cli.main", "up"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
    try:
        yield _wait_ready(up, data_dir, log)
    finally:
        _stop(up, data_dir)
        shutil.rmtree(base, ignore_errors=True)
