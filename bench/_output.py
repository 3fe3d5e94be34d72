"""How a benchmark hands in its figures: one line of JSON on stdout, and in ``--out`` if given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["emit"]


def emit(result: dict[str, Any], out: Path | None) -> None:
    """Print ``result`` as JSON; also write it to ``out`` (its folder created) when given."""
    text = json.dumps(result)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    print(text)
