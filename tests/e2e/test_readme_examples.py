"""The README's Python examples (and docs/sdk.md's quick start), run as a new user would on a fresh
`noemactl up`: each snippet that reads `noema.json` (the URL and the operator's credentials beside
it) connects and does what it says."""

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


def snippets(document: str) -> list[str]:
    """The ```python blocks of ``document`` that connect through noema.json."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / document).read_text(), re.S)
    return [b for b in blocks if "noema.json" in b]


def test_the_python_examples_of_the_readme_and_the_sdk_guide_run_on_a_fresh_instance(
    data_dir: Path, tmp_path: Path
) -> None:
    up = start(data_dir)
    try:
        readme, sdk = snippets("README.md"), snippets("docs/sdk.md")
        assert len(readme) >= 2, "the README's nats-py and SDK examples"
        assert sdk, "docs/sdk.md's quick start"
        # The README's read NOEMA_DATA_DIR; docs/sdk.md's quick start reads var/noema.json from the
        # folder `make run` runs in.
        for i, (code, cwd) in enumerate([(c, ROOT) for c in readme] + [(c, data_dir.parent) for c in sdk]):
            script = tmp_path / f"readme_{i}.py"
            script.write_text(code)
            env = _env(data_dir) | {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}
            done = subprocess.run(
                [sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, f"README example {i}:\n{code}\n{done.stderr}"
            assert done.stdout.strip(), code
    finally:
        assert stop(up) == 0
