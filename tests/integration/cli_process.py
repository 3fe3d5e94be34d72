"""`noemactl` run as a user runs it: a process, against a test's real servers (the harness's settings
as its environment)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from tests.integration.api_harness import ApiHarness

__all__ = ["NOEMACTL", "Ran", "ctl", "ctl_json"]

NOEMACTL = [sys.executable, "-m", "noema_cli.main"]


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str


async def ctl(api: ApiHarness, *args: str, stdin: bytes = b"") -> Ran:
    """Run noemactl against the test's servers (without blocking the in-process projector), with
    ``stdin`` on its standard input."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    env |= {**api.h.settings.to_env(), "NOEMA_EMBEDDER": "none", "USER": "carol"}
    proc = await asyncio.create_subprocess_exec(
        *NOEMACTL,
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 120)
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())


async def ctl_json(api: ApiHarness, *args: str) -> Any:
    ran = await ctl(api, *args, "--json")
    assert ran.code == 0, ran.stderr
    return json.loads(ran.stdout)
