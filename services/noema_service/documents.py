"""Generate the JSON Schema and AsyncAPI documents of the event catalog into ``schemas/``.

Run with ``python -m noema_service.documents [--check]`` (``make schemas``). ``--check`` exits non-zero
when the committed files differ from what the code generates, so stale schemas fail the build.
``json/`` has a schema for every version a stream may hold (earlier versions included, as readers of
old events need them); the AsyncAPI document (:mod:`noema_events.asyncapi`) lists the current
versions to publish, the earlier ones readers still receive, the dead letters and the agent service's
requests and replies.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgspec

from noema.errors import SURFACES
from noema_events.asyncapi import Endpoint, asyncapi
from noema_events.catalog import EVENT_TYPES
from noema_events.datetimes import with_datetimes
from noema_events.upcasting import EARLIER_TYPES
from noema_service.operations import OPERATIONS

__all__ = ["generate", "main", "service_endpoints"]

SCHEMAS_DIR = Path(__file__).resolve().parents[2] / "schemas"
"""The repository's ``schemas/`` folder (the documents are committed there)."""


def _dump(doc: Any) -> str:
    return msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n"


def service_endpoints() -> tuple[list[Endpoint], list[int]]:
    """The agent service's operations and its reply codes, read from the service itself.

    This build step lives above the service it documents (and the catalog it reads): the catalog,
    :mod:`noema_events`, stays the msgspec-only package that publishers use.
    """

    endpoints = [Endpoint(op.name, op.description, op.input, op.result) for op in OPERATIONS.values()]
    codes = sorted({s.nats for s in SURFACES.values() if s.nats is not None})
    return endpoints, codes


def generate() -> dict[Path, str]:
    """Return every generated file (path → text); pure, so ``--check`` can compare."""
    files: dict[Path, str] = {}
    for tag, cls in sorted({**EVENT_TYPES, **EARLIER_TYPES}.items()):
        (schema,), components = msgspec.json.schema_components([cls], ref_template="#/$defs/{name}")
        doc = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://noema.dev/schemas/{tag}.json",
            "title": tag,
            **schema,
            "$defs": with_datetimes(components, [cls]),
        }
        files[SCHEMAS_DIR / "json" / f"{tag}.json"] = _dump(doc)
    files[SCHEMAS_DIR / "asyncapi.json"] = _dump(asyncapi(*service_endpoints()))
    return files


def main(argv: list[str] | None = None) -> int:
    """Write the generated files, or with ``--check`` report the stale ones and fail."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if committed files are stale")
    args = parser.parse_args(argv)
    files = generate()
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    known = set(files)
    extra = [p for p in (SCHEMAS_DIR / "json").glob("*.json") if p not in known]
    if args.check:
        for p in stale:
            print(f"stale: {p.relative_to(SCHEMAS_DIR.parent)}", file=sys.stderr)
        for p in extra:
            print(f"no longer generated: {p.relative_to(SCHEMAS_DIR.parent)}", file=sys.stderr)
        if stale or extra:
            print("run `make schemas` and commit the result", file=sys.stderr)
            return 1
        return 0
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(files[p])
        print(f"wrote {p.relative_to(SCHEMAS_DIR.parent)}")
    for p in extra:
        p.unlink()
        print(f"removed {p.relative_to(SCHEMAS_DIR.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
