"""``noemactl audit`` (the log), ``noemactl audit diff FROM TO`` (what changed between two points of
the stream) and ``noemactl why ID`` (the chain of events behind an id).

Each calls the application layer (:class:`noema.application.facade.Noema`: ``audit``, ``audit_diff``,
``why``), as the HTTP API's ``/v1/audit``, ``/v1/audit/diff`` and ``/v1/why/{id}`` do, with the same
queries checked by the same rules; ``--json`` prints what the API answers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from noema.stream_points import POINT_FORMS

from .common import AsOfOption, DataDir, JsonOption, fail, out, run_app, use
from .render import event_table, print_page, print_record
from .why_tree import diff_tables, tree_lines

__all__ = ["audit_app", "register"]

audit_app = typer.Typer(
    help="The audit log, and what changed between two points of the stream (audit diff).",
    invoke_without_command=True,
)


def _query(struct: type[Any], values: dict[str, Any], check: Callable[[Any], object] | None = None) -> Any:
    """The query, checked (also by ``check``) before connecting: bad input is exit 2."""
    from noema.application.views import parse
    from noema.errors import InvalidQuery

    try:
        query = parse(struct, values)
        if check is not None:
            check(query)
    except InvalidQuery as exc:
        fail(str(exc), 2)
    return query


@audit_app.callback(invoke_without_command=True)
def audit(
    ctx: typer.Context,
    workspace: str | None = typer.Option(None, "--workspace", "-w", help="Workspace (default: all)."),
    event_type: str | None = typer.Option(
        None, "--type", help="Event type, e.g. operator.action (every version) or operator.action.v1."
    ),
    actor: str | None = typer.Option(None, help="Only events of this actor, e.g. operator:alice."),
    before: int | None = typer.Option(None, help="Only events before this stream sequence (the next page)."),
    limit: int = typer.Option(50, help="At most this many (1-200)."),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """The audit log: events newest first (who changed what, when, why, caused by what).

    The same log as the API's GET /v1/audit; an unknown --type is refused with the known ones.
    `noemactl audit diff FROM TO` lists what changed between two points instead.

    Example: noemactl audit --type operator.action -w acme
    """
    if ctx.invoked_subcommand is not None:
        return
    from noema.application.views import AuditQuery

    use(data_dir)
    values = {"workspace": workspace, "type": event_type, "actor": actor, "before": before, "limit": limit}
    query = _query(AuditQuery, values)
    page = run_app(lambda app: app.audit(query), as_of)
    print_page(page, as_json, event_table(page.items), "no matching events")
    if page.next_before is not None and not as_json:
        out.print(f"older events: --before {page.next_before}", highlight=False)


@audit_app.command("diff")
def diff(
    start: str = typer.Argument(..., metavar="FROM", help=f"Changes after this point: {POINT_FORMS}."),
    end: str = typer.Argument(..., metavar="TO", help="Up to this point (included), written the same way."),
    workspace: str | None = typer.Option(None, "--workspace", "-w", help="Workspace (default: all)."),
    limit: int = typer.Option(1000, help="Read at most this many change events (1-10000)."),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """What changed after FROM up to TO: memories created, retracted, superseded, archived or
    restored; facts, conflicts and policies; domains, grants and the access mode — each with the
    events responsible (sequence, type, actor, time).

    A point is a stream sequence or an ISO-8601 time with its zone (compared with each event's
    occurred_at); anything else is refused (exit 2). The same answer as the API's GET /v1/audit/diff.

    Example: noemactl audit diff 0 2026-03-01T09:30:00Z -w acme
    """
    from noema.application.audit_views import DiffQuery
    from noema.application.changes import diff_points  # the read model's adapters: not for --help

    use(data_dir)
    values = {"from": start, "to": end, "workspace": workspace, "limit": limit}
    query = _query(DiffQuery, values, check=diff_points)
    found = run_app(lambda app: app.audit_diff(query), as_of)
    if as_json:
        print_record(found)
        return
    heading, tables = diff_tables(found)
    out.print(heading, highlight=False, markup=False)
    for table in tables:
        out.print(table)
    if not tables:
        out.print("nothing changed", highlight=False)


def why(
    ref: str = typer.Argument(
        ...,
        metavar="ID",
        help="An event, memory, fact, policy or observation id (a memory's unique prefix will do).",
    ),
    workspace: str | None = typer.Option(
        None, "--workspace", "-w", help="Workspace (default: the one that has the id)."
    ),
    limit: int = typer.Option(500, help="At most this many events naming the id, and as many after them."),
    as_of: str | None = AsOfOption(),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Why an id is what it is: the events that name it, the causes they follow from and what they
    caused, through causation and correlation ids, as a tree (each event under its cause) with the
    actor, time and what each event records (attention and recall scores, the conflict rule, …).

    An unknown id is exit 4. The same answer as the API's GET /v1/why/{id}.

    Example: noemactl why 3f0c1a2b
    """
    from noema.application.audit_views import WhyQuery

    use(data_dir)
    query = _query(WhyQuery, {"workspace": workspace, "limit": limit})
    found = run_app(lambda app: app.why(ref, query.workspace, query.limit), as_of)
    if as_json:
        print_record(found)
        return
    for line in tree_lines(found):
        out.print(line, highlight=False, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``audit`` (with ``audit diff``) and ``why`` to ``noemactl``."""
    app.add_typer(audit_app, name="audit")
    app.command()(why)
