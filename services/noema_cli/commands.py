"""The async work behind ``noemactl status`` (no printing here); every other command calls the
application facade (:class:`noema.application.facade.Noema`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from noema.adapters.jetstream import connect_within
from noema.composition.replay import live_position as _live_position
from noema.runtime.credentials import redact_url
from noema.runtime.locate import read_state, state_nats_url
from noema.runtime.readiness import STARTING, system_status
from noema.runtime.settings import Located

__all__ = ["status"]


def _http_status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=3) as resp:
        return int(resp.status)


def _running(pid: int) -> bool:
    """True while ``pid`` runs; a process that exited but was not reaped yet (a zombie, e.g. while
    ``up`` is busy or stopped) is not running, though it still answers signal 0."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (not Linux): signal 0 is all there is
    return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])


def _started_at(state: dict[str, Any] | None) -> float | None:
    """When ``up`` started the instance (UNIX seconds), from its state file; None when unknown."""
    try:
        return datetime.fromisoformat(str((state or {})["started_at"])).timestamp()
    except (KeyError, ValueError):
        return None


async def status(settings: Located) -> dict[str, Any]:
    """Health of every part: the system checks of :mod:`noema.runtime.readiness` (the same as ``/readyz``),
    plus, for the instance ``up`` runs from this data folder, its API and its processes; and the
    per-worker figures (backlog, rate, drain estimate, state)."""
    nc = None
    nats_error = None
    try:
        nc = await connect_within(settings.nats_url, "noemactl-status", 5, auth=settings.nats_auth)
    except Exception as exc:  # whatever the reason, NATS is not usable: that is the finding
        nats_error = f"{redact_url(settings.nats_url)}: {type(exc).__name__}: {exc}".rstrip(": ")
    # `settings` already carries the URLs (located); the state file tells whether they are ours.
    state = read_state(settings.data_dir.expanduser().resolve())
    if state is not None and state_nats_url(state) != settings.nats_url:
        state = None
    started_at = _started_at(state)
    try:
        found = await system_status(
            settings, nc, lambda: _live_position(settings), nats_error=nats_error, started_at=started_at
        )
    finally:
        if nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), 2)
    checks = [{"name": c.name, "ok": c.ok, "detail": c.detail, "state": c.state} for c in found.checks]

    just_started = started_at is not None and time.time() - started_at <= settings.stall_after_s

    def add(name: str, ok: bool, detail: str) -> None:
        if not ok and just_started and name == "api http":  # the API is still starting up
            checks.append({"name": name, "ok": ok, "detail": f"starting: {detail}", "state": STARTING})
        else:
            checks.append({"name": name, "ok": ok, "detail": detail, "state": ""})

    expected = settings.expected_workers
    if state and state.get("api_url") and "api" in expected:
        url = f"{state['api_url']}/healthz"
        try:
            code = await asyncio.to_thread(_http_status, url)
            add("api http", code == 200, url)
        except OSError as exc:
            add("api http", False, f"{url}: {exc}")
    if state:
        for name, pid in state.get("services", {}).items():
            if name not in expected:
                continue
            if _running(int(pid)):
                add(f"process {name}", True, f"pid {pid}")
            else:
                add(f"process {name}", False, f"pid {pid} is not running")
    workers = [msgspec.to_builtins(w) for w in found.workers]
    failed = [c for c in checks if not c["ok"]]
    return {
        "healthy": not failed,
        # Only parts taking their claim right after a start do not pass yet (exit 3, not 1).
        "starting": bool(failed) and all(c["state"] == STARTING for c in failed),
        "checks": checks,
        "workers": workers,
    }
