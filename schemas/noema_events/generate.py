"""Generate the JSON Schema and AsyncAPI documents of the event catalog into ``schemas/``.

Run with ``python -m noema_events.generate [--check]`` (``make schemas``). ``--check`` exits non-zero
when the committed files differ from what the code generates, so stale schemas fail the build.
``json/`` has a schema for every version a stream may hold (earlier versions included, as readers of
old events need them); the AsyncAPI document lists the current versions, the ones to publish.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgspec

from .catalog import EVENT_TYPES
from .upcasting import EARLIER_TYPES

__all__ = ["generate", "main"]

SCHEMAS_DIR = Path(__file__).resolve().parent.parent

SUBJECTS = {
    "observation.recorded": "{prefix}.obs.{workspace}.{mind}",
    "recall.proposed": "{prefix}.obs.{workspace}.{mind}.recall",
}
EVENT_SUBJECT = "{prefix}.evt.{workspace}.{mind}.{event}"


def _dump(doc: Any) -> str:
    return msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n"


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
            "$defs": components,
        }
        files[SCHEMAS_DIR / "json" / f"{tag}.json"] = _dump(doc)

    classes = [EVENT_TYPES[t] for t in sorted(EVENT_TYPES)]
    _, components = msgspec.json.schema_components(classes, ref_template="#/components/schemas/{name}")
    messages = {}
    channels: dict[str, Any] = {}
    for tag, cls in sorted(EVENT_TYPES.items()):
        name = tag.rsplit(".", 1)[0]
        messages[tag] = {
            "name": tag,
            "title": cls.__name__,
            "summary": (cls.__doc__ or "").strip().splitlines()[0],
            "contentType": "application/json",
            "headers": {
                "type": "object",
                "properties": {"Nats-Msg-Id": {"type": "string", "description": "the event id"}},
            },
            "payload": {"$ref": f"#/components/schemas/{cls.__name__}"},
        }
        address = SUBJECTS.get(name, EVENT_SUBJECT.replace("{event}", name.replace(".", "_")))
        channels[name] = {
            "address": address,
            "messages": {tag: {"$ref": f"#/components/messages/{tag}"}},
        }
    asyncapi = {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Noema events",
            "version": "1",
            "description": (
                "Every state change of Noema is an event on NATS JetStream. Observations go to the "
                "observation stream, everything else to the event stream. Publish with the header "
                "Nats-Msg-Id set to the event id so a retried publish is stored once. {prefix} is "
                "'noema' by default; {mind} is '_' for workspace-wide events."
            ),
        },
        "defaultContentType": "application/json",
        "channels": channels,
        "components": {"messages": messages, "schemas": components},
    }
    files[SCHEMAS_DIR / "asyncapi.json"] = _dump(asyncapi)
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
