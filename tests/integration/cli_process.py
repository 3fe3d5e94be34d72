"""`noemactl` run as a user runs it: a process, against a test's real servers (the harness's settings
as its environment)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.integration.api_harness import ApiHarness

__all__ = ["NOEMACTL", "Ran", "ctl", "ctl_json", "ctl_loaded"]

NOEMACTL = [sys.executable, "-m", "noema_cli.main"]

REPORTING = """
import json, sys
sys.argv = ["noemactl", *sys.argv[1:]]
from noema_cli.main import main
try:
    main()
finally:
    print(json.dumps({"loaded": sorted(sys.modules)}), file=sys.stderr)
"""
"""noemactl, then the modules the process loaded, as the last line of its standard error."""


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str


async def ctl(api: ApiHarness, *args: str, stdin: bytes = b"", program: Sequence[str] = NOEMACTL) -> Ran:
    """Run noemactl against the test's servers (without blocking the in-process projector), with
    ``stdin`` on its standard input."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    env |= {**api.h.settings.to_env(), "NOEMA_EMBEDDER": "none", "USER": "carol"}
    proc = await asyncio.create_subprocess_exec(
        *program,
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


async def ctl_loaded(api: ApiHarness, *args: str) -> tuple[Ran, set[str]]:
    """:func:`ctl`, and the modules the process loaded (its standard error without their list)."""
    ran = await ctl(api, *args, program=[sys.executable, "-c", REPORTING])
    *rest, last = ran.stderr.splitlines()
    return Ran(ran.code, ran.stdout, "\n".join(rest)), set(json.loads(last)["loaded"])
