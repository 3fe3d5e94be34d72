"""How ``noemactl`` shows the operators' reads: Rich tables of memories and events, and JSON that is
exactly what the HTTP API answers (the same :mod:`noema.application.views` records, encoded the same way)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .common import clip, out, print_json

if TYPE_CHECKING:  # rich, msgspec and the records: loaded by what prints them, not by --help
    import msgspec
    from rich.table import Table

    from noema.application.views import AuditPage, EventRecord, Memory, MemoryPage

__all__ = [
    "erased_content",
    "event_table",
    "memory_table",
    "print_page",
    "print_record",
    "when",
    "worker_table",
]


def print_record(record: msgspec.Struct) -> None:
    """Print a record as the API's JSON."""
    import msgspec

    print_json(msgspec.to_builtins(record))


def print_page(page: MemoryPage | AuditPage, as_json: bool, table: Table, empty: str) -> None:
    """A page as the API's JSON, or its table (``empty`` when it has no items)."""
    if as_json:
        print_record(page)
    else:
        out.print(table if page.items else empty)


def when(value: datetime | None) -> str:
    """A timestamp to the second ("-" when absent)."""
    return value.isoformat(timespec="seconds") if value else "-"


def erased_content(content: str, erased_at: datetime | None) -> str:
    """A memory's content as shown: said to be erased when it was (docs/privacy.md), rather than
    an empty text that looks like an empty memory."""
    return f"(content erased at {when(erased_at)})" if erased_at else content


def memory_table(items: Sequence[Memory], *, happened: bool = False) -> Table:
    """One row per memory; ``happened`` leads with when it happened (the timeline's order)."""
    from rich.table import Table

    columns = ["id", "workspace/mind", "kind", "status", "activation", "content"]
    table = Table(*(["happened", *columns] if happened else [*columns, "created"]))
    for m in items:
        row = [m.id[:8], f"{m.workspace}/{m.mind or '-'}", m.kind, m.status, f"{m.activation:.3f}"]
        row.append(clip(erased_content(m.content, m.erased_at)))
        if happened:
            table.add_row(when(m.happened_at or m.created_at), *row)
        else:
            table.add_row(*row, when(m.created_at))
    return table


def _what(payload: dict[str, Any]) -> str:
    what = payload.get("reason") or payload.get("content") or payload.get("rule") or payload.get("memory_id")
    return clip(str(what or ""), 50)


def event_table(events: Sequence[EventRecord], title: str | None = None) -> Table:
    """One row per event: sequence, type, scope, actor, time and what it says (reason, content, …)."""
    from rich.table import Table

    table = Table("seq", "type", "workspace/mind", "actor", "at", "what", title=title)
    for e in events:
        table.add_row(
            str(e.seq),
            e.type,
            f"{e.workspace}/{e.mind or '-'}",
            e.actor,
            when(e.occurred_at),
            _what(e.payload),
        )
    return table


def worker_table(workers: Sequence[dict[str, Any]]) -> Table:
    """``status``'s per-worker figures: live processes, backlog, rate, drain estimate, state."""
    from rich.table import Table

    from noema.runtime.backlog import format_drain

    table = Table("worker", "live", "backlog", "rate/s", "drain", "state")
    for w in workers:
        backlog, rate = w.get("backlog"), w.get("rate")
        if not backlog:
            drain = "-"
        elif w.get("drain_s") is None and rate is not None and backlog:
            drain = "never"  # a backlog and no progress
        else:
            drain = format_drain(w.get("drain_s"))
        state = w["state"] if w["ok"] else f"[red]{w['state']}[/]"
        table.add_row(
            w["worker"],
            str(w["live"]),
            "-" if backlog is None else str(backlog),
            "-" if rate is None else f"{rate:.1f}",
            drain,
            state,
        )
    return table
