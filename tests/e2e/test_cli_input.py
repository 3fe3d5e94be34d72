"""Every ``noemactl`` command refuses command-line bytes that are not UTF-8 with exit 2 and a
message, never a traceback — as a user's shell passes them (real bytes in argv of a real process).

The command tree is walked as tests/unit/test_cli.py does, so a new command is covered the day it
is added. Nothing runs in the data folder: a command that reached the point of connecting would say
"no running Noema" instead, so the message proves the input was refused first.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_cli import _commands

pytestmark = pytest.mark.slow

NOEMACTL = [sys.executable, "-m", "noema_cli.main"]
BAD = os.fsdecode(b"caf\xe9 \xff")
"""Latin-1 text and a stray byte, as Python receives them in argv (surrogate escapes)."""
SHOWN = "caf\\xe9 \\xff"


def _argv(name: str, cmd: Any) -> list[str]:
    """The command with every required parameter given; the first that takes text gets BAD."""
    values = [p for p in cmd.params if not getattr(p, "is_flag", False) and p.name != "as_json"]
    arguments = [p for p in values if not p.opts[0].startswith("-")]
    options = [p for p in values if p.opts[0].startswith("-")]
    target = (arguments or [p for p in options if p.required] or options)[0]
    argv = name.split()
    for p in arguments:
        argv.append(BAD if p is target else "x")
    for p in options:
        if p.required or p is target:
            argv += [p.opts[0], BAD if p is target else "x"]
    return argv


def _run(argv: list[str], data_dir: Path, **env: str) -> subprocess.CompletedProcess[bytes]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA_")}
    return subprocess.run(
        [*NOEMACTL, *argv],
        env={**clean, "NOEMA_DATA_DIR": str(data_dir), **env},
        capture_output=True,
        timeout=120,
        check=False,
    )


def _refused(result: subprocess.CompletedProcess[bytes], argv: list[str]) -> str:
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, (argv, result.returncode, stderr)
    assert "Traceback" not in stderr, (argv, stderr)
    assert "not valid UTF-8" in stderr, (argv, stderr)
    return stderr


def test_every_command_refuses_an_argument_that_is_not_utf8_before_doing_anything(tmp_path: Path) -> None:
    cases = [_argv(name, cmd) for name, cmd in _commands()]
    assert len(cases) > 30
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda argv: _run(argv, tmp_path), cases))
    for argv, result in zip(cases, results, strict=True):
        stderr = _refused(result, argv)
        assert SHOWN in stderr, (argv, stderr)  # the bad bytes are shown, so the user sees which
    assert list(tmp_path.iterdir()) == []  # nothing was started, created or written


@pytest.mark.parametrize(
    "argv",
    [
        ["observe", "fine", "--workspace", BAD, "--mind", "ops"],
        ["observe", "fine", f"--workspace={BAD}", "--mind", "ops"],
        ["memory", "search", "deploy", "--json", "--domain", BAD],
        [f"--data-dir={BAD}", "status"],
    ],
)
def test_an_option_value_that_is_not_utf8_is_named(tmp_path: Path, argv: list[str]) -> None:
    stderr = _refused(_run(argv, tmp_path), argv)
    if "--json" in argv:
        assert '"exit_code": 2' in stderr
    elif argv[-2:] == ["--mind", "ops"] and "--workspace" in argv:
        assert "--workspace" in stderr


def test_an_environment_variable_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    argv = ["mcp", "serve", "--agent", "alice"]
    result = _run(argv, tmp_path, NOEMA_WORKSPACE=BAD)
    assert "NOEMA_WORKSPACE" in _refused(result, argv)
