"""``noemactl memory list|timeline|show``: the operators' reads of memory.

Each calls the application layer (:class:`noema.application.facade.Noema`; the listing and the
timeline its reader of memory alone, :class:`noema.application.memory_reads.MemoryReader`), as
the HTTP API does: the same filters,
checked by the same rules (:func:`noema.application.views.parse`), and ``--json`` prints what the API answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from noema.instants import FORMS

from .common import AsOfOption, DataDir, JsonOption, clip, fail, out, read_memory, run_app, use
from .render import erased_content, event_table, memory_table, print_page, print_record, when

if TYPE_CHECKING:  # the views (msgspec Structs) load when a command runs, not for --help
    from noema.application.views import MemoryDetail

__all__ = ["register"]

KINDS = "episodic, semantic, procedural or autobiographical"
STATUSES = "active, retracted, superseded, archived or erased"
INSTANT = FORMS


def _query(struct: type[Any], **values: Any) -> Any:
    from noema.application.views import parse
    from noema.errors import InvalidQuery

    try:
        return parse(struct, values)
    except InvalidQuery as exc:
        fail(str(exc), 2)


def memory_list(
    workspace: str | None = typer.Option(None, "--workspace", "-w", help="Workspace (default: all)."),
    mind: str | None = typer.Option(None, "--mind", "-m", help="Only this mind's memories."),
    kind: str | None = typer.Option(None, "--kind", "-k", help=f"Memory kind: {KINDS}."),
    epistemic_kind: str | None = typer.Option(
        None, "--epistemic-kind", "-e", help="Epistemic kind, e.g. fact, observation, belief, hypothesis."
    ),
    status: str | None = typer.Option(None, "--status", "-s", help=f"{STATUSES} (default: every status)."),
    domain: str | None = typer.Option(None, "--domain", "-d", help="Only this domain."),
    since: str | None = typer.Option(
        None, metavar="DATE|TIME", help=f"Happened (else created) at or after this time: {INSTANT}."
    ),
    until: str | None = typer.Option(
        None, metavar="DATE|TIME", help=f"Happened (else created) before this time: {INSTANT}."
    ),
    limit: int = typer.Option(50, help="At most this many (1-200)."),
    offset: int = typer.Option(0, help="Skip this many (the next page)."),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """List memories, newest first, with filters (every status unless --status is given).

    The same listing as the API's GET /v1/memories.

    Example: noemactl memory list -w acme --kind semantic --status active
    """
    from noema.application.views import ListQuery

    use(data_dir)
    query = _query(
        ListQuery,
        workspace=workspace,
        mind=mind,
        kind=kind,
        epistemic_kind=epistemic_kind,
        status=status,
        domain=domain,
        since=since,
        until=until,
        limit=limit,
        offset=offset,
    )

    page, note = read_memory(lambda app: app.list_memories(query), workspace, lambda p: not p.items, as_of)
    print_page(page, as_json, memory_table(page.items), f"no matching memories{note}")


def memory_timeline(
    workspace: str = typer.Option(..., "--workspace", "-w", help="Workspace."),
    mind: str | None = typer.Option(None, "--mind", "-m", help="Only this mind's memories."),
    since: str | None = typer.Option(
        None, metavar="DATE|TIME", help=f"Happened (else created) at or after this time: {INSTANT}."
    ),
    until: str | None = typer.Option(
        None, metavar="DATE|TIME", help=f"Happened (else created) before this time: {INSTANT}."
    ),
    order: str = typer.Option("desc", help="desc (latest first) or asc (oldest first)."),
    limit: int = typer.Option(50, help="At most this many (1-200)."),
    offset: int = typer.Option(0, help="Skip this many (the next page)."),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """A workspace's memories in the order things happened (when they happened, else when recorded).

    The same timeline as the API's GET /v1/timeline; every status.

    Example: noemactl memory timeline -w acme --since 2025-06-01T00:00:00Z
    """
    from noema.application.views import TimelineQuery

    use(data_dir)
    query = _query(
        TimelineQuery,
        workspace=workspace,
        mind=mind,
        since=since,
        until=until,
        order=order,
        limit=limit,
        offset=offset,
    )

    page, note = read_memory(lambda app: app.timeline(query), workspace, lambda p: not p.items, as_of)
    period = " in this period" if since or until else ""
    empty = f"no memories in workspace {workspace}{f' / mind {mind}' if mind else ''}{period}{note}"
    print_page(page, as_json, memory_table(page.items, happened=True), empty)


def _show(detail: MemoryDetail) -> None:
    from rich.table import Table

    fields = Table("field", "value", show_header=False)
    memory = detail.memory
    for name in memory.__struct_fields__:
        value = getattr(memory, name)
        if name == "content":
            value = erased_content(memory.content, memory.erased_at)
        fields.add_row(name, "-" if value is None else str(value))
    out.print(fields)
    origin = detail.origin
    if origin:
        out.print(
            f"[bold]origin event[/] {origin.type} #{origin.seq} id={origin.id} actor={origin.actor} "
            f"causation={origin.causation_id or '-'} at={when(origin.occurred_at)}",
            highlight=False,
        )
        out.print(origin.payload, highlight=False)
    if detail.source_observations:
        sources = Table(
            "observation", "attention", "score", "reason", "decided by", title="source observations"
        )
        for s in detail.source_observations:
            d = s.decision
            if d is None:
                sources.add_row(s.id, "no decision recorded", "", "", "")
            else:
                sources.add_row(
                    s.id,
                    "admitted" if d.get("admitted") else "not admitted",
                    f"{d.get('score', 0.0):.3f}",
                    clip(str(d.get("reason", "")), 40),
                    f"attention.decided #{d.get('seq')}",
                )
        out.print(sources)
    if detail.relationships:
        rel = Table("relation", "direction", "other memory", "confidence", "source", title="relationships")
        for r in detail.relationships:
            other = r.to_id if r.direction == "out" else r.from_id
            rel.add_row(
                r.relation,
                r.direction,
                f"{other[:8]} {clip(r.other_content, 50)}",
                f"{r.confidence:.2f}",
                r.source,
            )
        out.print(rel)
    for e in detail.embeddings:
        out.print(f"[bold]vector[/] {e.model} ({e.dimensions} dimensions) at {when(e.created_at)}")
    if detail.citing_events:
        out.print(event_table(detail.citing_events, title="events citing it (newest first)"))


def memory_show(
    memory_id: str = typer.Argument(..., help="Memory id, or a unique prefix of it (at least 6 characters)."),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Show one memory: every field, its origin event, its source observations with the attention
    decisions about them, relationships, vectors and the events that cite it.

    The same detail as the API's GET /v1/memories/{id}.

    Example: noemactl memory show 3f0c1a2b
    """
    use(data_dir)
    detail = run_app(lambda app: app.memory(memory_id), as_of)
    if as_json:
        print_record(detail)
    else:
        _show(detail)


def register(memory_app: typer.Typer) -> None:
    """Add the reads to ``noemactl memory``."""
    memory_app.command("list")(memory_list)
    memory_app.command("timeline")(memory_timeline)
    memory_app.command("show")(memory_show)
