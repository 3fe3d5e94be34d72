"""``noemactl`` operator corrections of memory (retract, correct, archive, restore) and the audit log.

Each correction goes through :mod:`noema.operator` — the same operations as the HTTP API — and is
recorded as an ``operator.action`` event naming the operator (``operator:$USER``) and the reason.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from noema import operator
from noema.adapters.jetstream import EventPublisher
from noema.adapters.postgres import MemoryQueries
from noema.app import Noema
from noema.operations import NotFound

from .common import DataDir, JsonOption, clip, operator_name, out, print_json, run_app, use

__all__ = ["register"]

Operation = Callable[..., Awaitable[operator.OperatorReceipt]]


async def _resolve(app: Noema, memory_id: str) -> str:
    try:
        full = await MemoryQueries(app.pool).resolve(memory_id)
    except LookupError as exc:
        raise NotFound(str(exc)) from None
    if full is None:
        raise NotFound(f"no memory {memory_id}")
    return full


def _report(receipt: operator.OperatorReceipt, what: str, as_json: bool) -> None:
    if as_json:
        print_json(
            {
                "memory_id": receipt.memory_id,
                "workspace": receipt.workspace,
                "action_event_id": receipt.action_event_id,
                "events": list(receipt.events),
            }
        )
    else:
        out.print(f"{what} (operator_action {receipt.action_event_id})")


def _status_command(op: Operation, verb: str, done: str) -> Callable[..., None]:
    def command(
        memory_id: str = typer.Argument(..., help="Memory id, or a unique prefix (at least 6 characters)."),
        reason: str = typer.Option(..., "--reason", help="Why (kept in the audit log)."),
        data_dir: Path | None = DataDir(),
        as_json: bool = JsonOption(),
    ) -> None:
        use(data_dir)

        async def work(app: Noema) -> operator.OperatorReceipt:
            full = await _resolve(app, memory_id)
            publisher = EventPublisher(app.nc, app.topology)
            return await op(
                app.pool,
                publisher,
                full,
                actor=f"operator:{operator_name()}",
                reason=reason,
                now=datetime.now(UTC),
            )

        receipt = run_app(work)
        _report(receipt, f"memory {receipt.memory_id} {done}", as_json)

    command.__doc__ = (
        f"{verb.capitalize()} a memory: it stays readable with its new status; the reason is audited.\n\n"
        f'    Example: noemactl memory {verb} 3f0c1a2b --reason "the key was rotated"'
    )
    return command


def correct(
    memory_id: str = typer.Argument(..., help="Memory id, or a unique prefix."),
    content: str = typer.Argument(..., help="The corrected content."),
    reason: str = typer.Option(..., "--reason", help="Why (kept in the audit log)."),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Correct a memory: a new memory with the corrected content supersedes it (both kept).

    Example: noemactl memory correct 3f0c1a2b "the deploy key rotates on Mondays" --reason "runbook changed"
    """
    use(data_dir)

    async def work(app: Noema) -> operator.OperatorReceipt:
        full = await _resolve(app, memory_id)
        return await operator.correct(
            app.pool,
            EventPublisher(app.nc, app.topology),
            full,
            actor=f"operator:{operator_name()}",
            reason=reason,
            content=content,
            now=datetime.now(UTC),
        )

    receipt = run_app(work)
    _report(receipt, f"memory {memory_id} corrected by {receipt.memory_id}", as_json)


def audit(
    workspace: str | None = typer.Option(None, "--workspace", "-w"),
    event_type: str | None = typer.Option(None, "--type", help="Event name, e.g. operator.action."),
    actor: str | None = typer.Option(None, help="Only events of this actor."),
    limit: int = typer.Option(50, min=1, max=1000),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """The audit log: events newest first (who changed what, when, why, caused by what).

    Example: noemactl audit --type operator.action -w acme
    """
    use(data_dir)

    async def work(app: Noema) -> list[dict[str, Any]]:
        rows = await app.pool.fetch(
            "SELECT seq, id, type, workspace, mind, occurred_at, actor, causation_id, payload FROM events "
            "WHERE ($1::text IS NULL OR workspace = $1) "
            "AND ($2::text IS NULL OR type = $2 OR type LIKE $2 || '.v%') "
            "AND ($3::text IS NULL OR actor = $3) ORDER BY seq DESC LIMIT $4",
            workspace,
            event_type,
            actor,
            limit,
        )
        return [{**dict(r), "payload": json.loads(r["payload"])} for r in rows]

    rows = run_app(work)
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print("no matching events")
        return
    table = Table("seq", "type", "workspace/mind", "actor", "at", "what")
    for r in rows:
        p = r["payload"]
        what = p.get("reason") or p.get("content") or p.get("rule") or p.get("memory_id") or ""
        table.add_row(
            str(r["seq"]),
            r["type"],
            f"{r['workspace']}/{r['mind'] or '-'}",
            r["actor"],
            r["occurred_at"].isoformat(timespec="seconds"),
            clip(str(what), 50),
        )
    out.print(table)


def register(app: typer.Typer, memory_app: typer.Typer) -> None:
    """Add the operator commands to ``noemactl`` and ``noemactl memory``."""
    memory_app.command("retract")(_status_command(operator.retract, "retract", "retracted"))
    memory_app.command("archive")(_status_command(operator.archive, "archive", "archived"))
    memory_app.command("restore")(_status_command(operator.restore, "restore", "restored"))
    memory_app.command("correct")(correct)
    app.command()(audit)
