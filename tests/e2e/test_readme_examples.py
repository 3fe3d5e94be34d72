"""The README's Python examples, run as a new user would on a fresh `noemactl up`: each snippet that
reads `noema.json` (the URL and the operator's credentials beside it) connects and does what it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_noemactl import _env, start, stop
from tests.e2e.test_noemactl import data_dir as data_dir  # the fixture

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def snippets() -> list[str]:
    """The README's ```python blocks that connect through noema.json."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    found = [b for b in blocks if "noema.json" in b]
    assert len(found) >= 2, "the README's nats-py and SDK examples"
    return found


def test_the_readmes_python_examples_run_on_a_fresh_instance(data_dir: Path, tmp_path: Path) -> None:
    up = start(data_dir)
    try:
        for i, code in enumerate(snippets()):
            script = tmp_path / f"readme_{i}.py"
            script.write_text(code)
            env = _env(data_dir) | {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}
            done = subprocess.run(
                [sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, f"README example {i}:\n{code}\n{done.stderr}"
            assert done.stdout.strip(), code
    finally:
        assert stop(up) == 0
