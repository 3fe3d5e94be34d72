"""Logging configured on first use (:func:`noema.runtime.logging.configure_logging_on_first_use`, what
``noemactl`` does): a process that logs nothing loads no structlog (a keyword search's start-up,
issue 32), and whatever it does log comes out exactly as :func:`configure_logging` renders it — a
stdlib record, a record of a module that imports structlog later, a crash — never on standard
output, where a command prints its JSON answer.

Each case runs in a fresh interpreter: which modules are loaded, and the hooks installed, are the
process's own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

SETUP = """
import json, sys
from noema.runtime.logging import configure_logging_on_first_use
configure_logging_on_first_use("json", "warning")
def loaded(name):
    print(json.dumps({"loaded": name, "is": name in sys.modules}), file=sys.stderr)
"""


def _run(code: str, check: bool = True) -> tuple[str, list[dict[str, Any]]]:
    """Run SETUP then ``code``: its standard output, and its standard error's lines as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", SETUP + code], capture_output=True, text=True, timeout=60, check=check
    )
    return done.stdout, [json.loads(line) for line in done.stderr.splitlines() if line.strip()]


def _loaded(lines: list[dict[str, Any]], name: str) -> bool:
    return bool(next(line["is"] for line in lines if line.get("loaded") == name))


def test_nothing_logged_loads_no_structlog_nor_the_event_loop() -> None:
    out, lines = _run("""
import logging
logging.getLogger("asyncpg").info("below the level: not a first record")
loaded("structlog"); loaded("asyncio")
""")
    assert out == ""
    assert not _loaded(lines, "structlog")
    assert not _loaded(lines, "asyncio")


def test_a_stdlib_record_configures_logging_and_is_rendered_as_configured() -> None:
    out, lines = _run("""
import logging
logging.getLogger("asyncpg").warning("connection %s lost", "c1")
logging.getLogger("asyncpg").warning("and again")
loaded("structlog")
""")
    assert out == ""
    records = [line for line in lines if "event" in line]
    assert [(r["event"], r["logger"], r["level"]) for r in records] == [
        ("connection c1 lost", "asyncpg", "warning"),
        ("and again", "asyncpg", "warning"),
    ]
    assert all("timestamp" in r for r in records)
    assert _loaded(lines, "structlog")


def test_a_module_that_imports_structlog_later_logs_as_configured() -> None:
    out, lines = _run("""
import structlog
loaded("rich")
log = structlog.get_logger("noema.test")
log.info("below the level")
log.warning("pool not closed in time", within_s=5.0)
""")
    assert out == ""  # structlog's default configuration prints to standard output
    [record] = [line for line in lines if "event" in line]
    assert record.pop("timestamp")
    assert record == {"event": "pool not closed in time", "within_s": 5.0, "level": "warning"}
    assert not _loaded(lines, "rich")  # loaded without rich, as configure_logging loads it


def test_a_crash_is_logged_as_configured() -> None:
    out, lines = _run("raise ValueError('boom')", check=False)
    assert out == ""
    [crash] = lines
    assert crash["event"] == "uncaught exception: the process exits"
    assert crash["level"] == "critical"
    assert "ValueError: boom" in crash["exception"]


@pytest.mark.parametrize("level", ["info", "warning"])
def test_configuring_at_once_replaces_the_pending_configuration(level: str) -> None:
    out, lines = _run(f"""
from noema.runtime.logging import configure_logging
configure_logging("json", {level!r})
print(sum(type(f).__name__ == "_OnImport" for f in sys.meta_path))
import structlog
structlog.get_logger().info("an info record")
""")
    assert out.split() == ["0"]
    assert [line["event"] for line in lines] == (["an info record"] if level == "info" else [])
