"""Every process of ``up`` writes its JSON log into one shared file (or one pod's stream): each
record must reach it in one piece, one record per line, however many processes write at once.

A record written in two pieces (the text, then its newline) lets another process's record land
between them: two records on one line, which a log shipper — or a fault test reading the log —
cannot parse, and whichever record it drops is gone (found by a fault test whose partition owner's
"partition acquired" record was glued to the projector's "batch projected").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

WRITERS = 4
RECORDS = 3000

CHILD = f"""
import logging, os, structlog
from noema.runtime.logging import configure_logging
configure_logging("json")
log = structlog.get_logger("t")
std = logging.getLogger("std")
for i in range({RECORDS}):
    if i % 3:
        log.info("structlog record", writer=os.getpid(), i=i, pad="x" * (i % 300))
    else:
        std.warning("stdlib record %s", i)
"""


def test_records_of_concurrent_processes_sharing_one_log_file_never_share_a_line(tmp_path: Path) -> None:
    log_path = tmp_path / "shared.log"
    with log_path.open("ab") as log:  # as ``up`` gives its children its own log: O_APPEND
        writers = [
            subprocess.Popen([sys.executable, "-c", CHILD], stdout=log, stderr=subprocess.STDOUT)
            for _ in range(WRITERS)
        ]
        codes = [w.wait(120) for w in writers]
    assert codes == [0] * WRITERS
    lines = log_path.read_text().splitlines()
    broken = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            broken.append(line[:200])
            continue
        assert "event" in record, line[:200]
    assert broken == [], f"{len(broken)} of {len(lines)} lines are not one JSON record: {broken[:3]}"
    assert len(lines) == WRITERS * RECORDS


CRASHING = """
import threading, structlog
from noema.runtime.logging import configure_logging
configure_logging("json")
structlog.get_logger("t").info("started")
thread = threading.Thread(target=lambda: 1 / 0, name="helper")
thread.start()
thread.join()
class Finalized:
    def __del__(self):
        raise ValueError("in a finalizer")
Finalized()
raise RuntimeError("the worker gave up")
"""


def test_a_crash_is_logged_as_json_records_and_the_process_exits_non_zero() -> None:
    ran = subprocess.run([sys.executable, "-c", CRASHING], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 1
    records = [json.loads(line) for line in ran.stderr.splitlines()]  # every line one JSON record
    by_event = {r["event"]: r for r in records}
    crash = by_event["uncaught exception: the process exits"]
    assert crash["level"] == "critical"
    assert "RuntimeError: the worker gave up" in crash["exception"]
    assert "ZeroDivisionError" in by_event["uncaught exception in a thread"]["exception"]
    assert by_event["uncaught exception in a thread"]["thread"] == "helper"
    ignored = [r for r in records if "ValueError: in a finalizer" in r.get("exception", "")]
    assert len(ignored) == 1
    assert ran.stdout == ""
