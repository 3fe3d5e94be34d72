"""How ``noemactl why`` draws an id's history: a tree of steps (each event under the one that caused
it), every event with its actor, time and whatever its payload records (scores, components,
decisions, rules), and how ``noemactl audit diff`` lists changes. Pure functions of the records, so
the rendering is tested without a running instance."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich, and the records: loaded by what prints them, not by --help
    from rich.table import Table

    from noema.application.audit_views import AuditDiff, Why, WhyStep

__all__ = ["diff_tables", "payload_lines", "tree_lines"]

_TEXT = 72
_LISTED = 3
"""At most this many items of a list of records are shown, unless they concern the steps."""
_EPOCH_FLOOR = 1e8
"""A temporal score above this is a Unix time (recency), not a 0/1 match of a named time window."""

_CAUSES = {
    "observation": "observation (on the observation stream)",
    "recall": "recall proposal (on the observation stream)",
    "cause": "cause (not an event; nothing recorded explains it)",
}


def _scalar(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, str):
        text = " ".join(value.split())
        text = text if len(text) <= _TEXT else text[: _TEXT - 1] + "…"
        return f'"{text}"' if (not text or " " in text or '"' in text) else text
    return str(value)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _component(key: str, value: Any) -> str:
    """A score component: the temporal voice's value for recency is when the memory happened (a
    Unix time), shown as that time; anything else as a scalar."""
    if key == "temporal_score" and isinstance(value, int | float) and value > _EPOCH_FLOOR:
        return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return _scalar(value)


def _inline(record: Mapping[str, Any]) -> str:
    """A record on one line: ``key=value`` pairs, nested records and lists compacted."""
    parts = []
    for key, value in record.items():
        if _is_scalar(value):
            parts.append(f"{key}={_component(key, value)}")
        elif isinstance(value, Mapping):
            parts.append(f"{key}=({_inline(value)})")
        else:
            parts.append(f"{key}={_list(value)}")
    return " ".join(parts)


def _list(values: Sequence[Any]) -> str:
    if len(values) > 8 and all(isinstance(v, int | float) for v in values):
        return f"[{len(values)} numbers]"  # a vector
    return (
        "["
        + ", ".join(_scalar(v) if _is_scalar(v) else "…" for v in values[:8])
        + (", …]" if len(values) > 8 else "]")
    )


def _mentions(value: Any, ids: set[str]) -> bool:
    if isinstance(value, str):
        return value in ids
    if isinstance(value, Mapping):
        return any(_mentions(v, ids) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, ids) for v in value)
    return False


def payload_lines(payload: Mapping[str, Any], focus: Iterable[str] = ()) -> list[str]:
    """What a payload records, as lines: its plain fields on the first, then one per nested record
    (e.g. score ``components``), and the items of a list of records (e.g. an attention cycle's
    ``decisions``) — those that name one of ``focus`` (the ids of the steps), else the first few."""
    ids = set(focus)
    plain = {
        k: v for k, v in payload.items() if _is_scalar(v) or (isinstance(v, list) and all(map(_is_scalar, v)))
    }
    lines = [_inline(plain)] if plain else []
    for key, value in payload.items():
        if isinstance(value, Mapping):
            lines.append(f"{key}: {_inline(value)}")
        elif isinstance(value, list) and not all(map(_is_scalar, value)):
            records = [v for v in value if isinstance(v, Mapping)]
            shown = [r for r in records if _mentions(r, ids)] or records[:_LISTED]
            more = f" ({len(records) - len(shown)} more not shown)" if len(shown) < len(records) else ""
            lines.append(f"{key}: {len(records)}{more}")
            lines += [f"  - {_inline(r)}" for r in shown]
    return lines


def _headline(step: WhyStep) -> str:
    e = step.event
    if e is None:
        return f"{_CAUSES[step.kind]} {step.id}"
    via = " (by correlation)" if step.link == "correlation" else ""
    return f"#{e.seq} {e.type}{via} · {e.actor} · {e.occurred_at.isoformat(timespec='seconds')} · {e.id}"


def _decision(d: Mapping[str, Any]) -> str:
    verdict = "admitted" if d.get("admitted") else "not admitted"
    parts = [f"attention: {verdict}", f"score {_scalar(d.get('score', 0.0))}"]
    if d.get("reason") and d.get("reason") != "admitted":
        parts.append(_scalar(d["reason"]))
    components = d.get("components")
    if isinstance(components, Mapping) and components:
        parts.append(_inline(components))
    parts.append(f"decided in attention.decided #{d.get('seq')}")
    return " · ".join(parts)


def _details(step: WhyStep, focus: set[str]) -> list[str]:
    if step.event is not None:
        return payload_lines(step.event.payload, focus)
    return [_decision(step.decision)] if step.decision else []


def tree_lines(why: Why) -> list[str]:
    """The steps of ``why`` as a tree: first causes at the left, each step under the one it follows
    from (in stream order), with what its event records beneath its headline."""
    ids = {s.id for s in why.steps}
    children: dict[str | None, list[WhyStep]] = {}
    for step in why.steps:
        children.setdefault(step.parent if step.parent in ids else None, []).append(step)
    focus = ids | {why.id} | {str(s.event.payload.get("memory_id")) for s in why.steps if s.event}
    count = sum(s.event is not None for s in why.steps)
    more = " (truncated: raise --limit to see more)" if why.truncated else ""
    lines = [f"{why.subject} {why.id} in workspace {why.workspace}: {count} event(s){more}"]
    seen: set[str] = set()

    def draw(step: WhyStep, lead: str, branch: str, below: str) -> None:
        seen.add(step.id)
        lines.append(f"{lead}{branch}{_headline(step)}")
        kids = [c for c in children.get(step.id, []) if c.id not in seen]
        pad = below + ("│   " if kids else "    ")
        lines.extend(f"{lead}{pad}{line}" for line in _details(step, focus))
        for i, kid in enumerate(kids):
            last = i == len(kids) - 1
            draw(kid, lead + below, "└── " if last else "├── ", "    " if last else "│   ")

    for root in children.get(None, []):
        draw(root, "", "", "")
    return lines


def diff_tables(diff: AuditDiff) -> tuple[str, list[Table]]:
    """``audit diff``'s heading and a table per kind of change (each change with its events)."""
    from rich.table import Table

    where = f" in workspace {diff.workspace}" if diff.workspace else ""
    span = f" (events #{diff.first_seq}–#{diff.last_seq})" if diff.first_seq is not None else ""
    more = f"; truncated: go on with `audit diff {diff.last_seq} {diff.to}`" if diff.truncated else ""
    heading = f"changes after {diff.from_} up to {diff.to}{where}{span}{more}"
    tables = []
    for group in diff.groups:
        table = Table(
            "target", "workspace", "what", "events responsible", title=f"{group.title} ({len(group.changes)})"
        )
        for c in group.changes:
            events = "\n".join(
                f"#{e.seq} {e.type} {e.actor} {e.occurred_at.isoformat(timespec='seconds')}" for e in c.events
            )
            table.add_row(c.target, c.workspace, c.summary, events)
        tables.append(table)
    return heading, tables
