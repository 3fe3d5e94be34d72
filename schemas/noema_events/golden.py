"""Frozen sample ("golden") files: one per published event version, in ``schemas/golden/``.

``python -m noema_events.golden`` writes a sample for every event version that has none and never
touches existing ones: once published, a version's sample is frozen, and a test decodes every
sample with the current code, so a change that breaks old events fails the build.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from msgspec import inspect as mi

from .catalog import EVENT_TYPES

__all__ = ["GOLDEN_DIR", "main", "sample"]

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden"
_WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _value(t: mi.Type, name: str) -> Any:
    match t:
        case mi.StrType(pattern=pattern) if pattern:
            return "acme"
        case mi.StrType():
            if name.endswith(("id", "_by")):
                return "00000000-0000-4000-8000-000000000001"
            return f"example {name}"
        case mi.BoolType():
            return True
        case mi.IntType():
            return 9
        case mi.FloatType():
            return 0.5
        case mi.DateTimeType():
            return _WHEN.isoformat()
        case mi.LiteralType(values=values):
            return values[0]
        case mi.UnionType(types=types):
            non_null = [x for x in types if not isinstance(x, mi.NoneType)]
            return _value(non_null[0], name) if non_null else None
        case mi.ListType(item_type=item):
            return [_value(item, name)]
        case mi.DictType(value_type=value_type):
            return {"key": _value(value_type, name)}
        case mi.StructType(cls=cls):
            return _struct(cls)
        case mi.Metadata(type=inner):
            return _value(inner, name)
    raise TypeError(f"no sample value for {t!r}")


def _struct(cls: type) -> dict[str, Any]:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    out: dict[str, Any] = {}
    if info.tag is not None:
        out[info.tag_field or "type"] = info.tag
    for f in info.fields:
        out[f.encode_name] = _value(f.type, f.name)
    return out


def sample(tag: str) -> bytes:
    """A complete, valid sample of one event version (every field filled)."""
    raw = _struct(EVENT_TYPES[tag])
    msgspec.convert(raw, EVENT_TYPES[tag])  # it must be valid
    return msgspec.json.format(msgspec.json.encode(raw), indent=2) + b"\n"


def main() -> int:
    """Write samples for event versions that have none."""
    GOLDEN_DIR.mkdir(exist_ok=True)
    for tag in sorted(EVENT_TYPES):
        path = GOLDEN_DIR / f"{tag}.json"
        if not path.exists():
            path.write_bytes(sample(tag))
            print(f"wrote {path.relative_to(GOLDEN_DIR.parent.parent)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
