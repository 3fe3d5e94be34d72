"""``noemactl`` operator changes to memory (add, retract, correct, archive, restore).

Each change goes through :mod:`noema.application.curation` — the same operations as the HTTP API — and is
recorded as an ``operator.action`` event naming the operator (``operator:$USER``) and the reason.
The audit log and its questions are :mod:`noema_cli.audit_cmd`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .common import DataDir, JsonOption, err, fail, operator_name, out, print_json, run_app, use
from .memory_cmd import INSTANT, KINDS

if TYPE_CHECKING:  # the application layer loads when a command runs, not for --help
    from noema.application import curation
    from noema.application.facade import StatusAction
    from noema.composition.instance import Instance

__all__ = ["register"]


def _report(receipt: curation.OperatorReceipt, what: str, as_json: bool) -> None:
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


def _status_command(action: StatusAction, verb: str, done: str) -> Callable[..., None]:
    def command(
        memory_id: str = typer.Argument(..., help="Memory id, or a unique prefix (at least 6 characters)."),
        reason: str = typer.Option(..., "--reason", help="Why (kept in the audit log)."),
        data_dir: Path | None = DataDir(),
        as_json: bool = JsonOption(),
    ) -> None:
        use(data_dir)

        async def work(app: Instance) -> curation.OperatorReceipt:
            full = await app.resolve_memory(memory_id)
            return await app.change_status(action, full, actor=f"operator:{operator_name()}", reason=reason)

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

    async def work(app: Instance) -> curation.OperatorReceipt:
        full = await app.resolve_memory(memory_id)
        return await app.correct(full, content, actor=f"operator:{operator_name()}", reason=reason)

    receipt = run_app(work)
    _report(receipt, f"memory {memory_id} corrected by {receipt.memory_id}", as_json)


def add(
    content: str = typer.Argument(..., help="What the memory says."),
    workspace: str = typer.Option(..., "--workspace", "-w", help="Workspace."),
    reason: str = typer.Option(..., "--reason", help="Why it is entered (kept in the audit log)."),
    mind: str = typer.Option("", "--mind", "-m", help="Mind it belongs to (default: none, the workspace's)."),
    kind: str = typer.Option("semantic", "--kind", "-k", help=f"Memory kind: {KINDS}."),
    epistemic_kind: str = typer.Option(
        "fact", "--epistemic-kind", "-e", help="Epistemic kind: fact, claim, belief, hypothesis, …"
    ),
    memory_type: str = typer.Option("fact", "--memory-type", help="fact, decision, preference, …"),
    domain: str | None = typer.Option(None, "--domain", "-d", help="Domain, e.g. ops."),
    topic: str | None = typer.Option(None, "--topic", "-t", help="Topic inside the domain."),
    repo: str | None = typer.Option(None, help="Repository it concerns."),
    confidence: float = typer.Option(1.0, help="Confidence, 0..1."),
    importance: float = typer.Option(0.5, help="How much it matters, 0..1."),
    participant: list[str] | None = typer.Option(None, "--participant", "-p", help="Who took part (repeat)."),
    happened_at: str | None = typer.Option(
        None, metavar="DATE|TIME", help=f"When it happened (default: now): {INSTANT}."
    ),
    valid_until: str | None = typer.Option(
        None, metavar="DATE|TIME", help=f"When it stops being true: {INSTANT}."
    ),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Enter knowledge as an operator: a memory on the operator channel (full credibility) and the
    operator_action that records who entered it and why. The same entry as the API's POST /v1/memories.

    Example: noemactl memory add "the on-call phone is 555-0100" -w acme -d ops --reason "runbook"
    """
    use(data_dir)
    from noema.application.curation import KnowledgeEntry
    from noema.application.views import parse
    from noema.errors import InvalidQuery

    try:
        entry = parse(
            KnowledgeEntry,
            {
                "workspace": workspace,
                "content": content,
                "mind": mind,
                "kind": kind,
                "epistemic_kind": epistemic_kind,
                "memory_type": memory_type,
                "domain": domain,
                "topic": topic,
                "repo": repo,
                "confidence": confidence,
                "importance": importance,
                "participants": participant or [],
                "happened_at": happened_at,
                "valid_until": valid_until,
            },
        )
    except InvalidQuery as exc:
        fail(str(exc), 2)

    async def work(app: Instance) -> curation.OperatorReceipt:
        return await app.enter_knowledge(operator_name(), entry, reason)

    receipt = run_app(work)
    _report(receipt, f"memory {receipt.memory_id} entered", as_json)
    if entry.valid_until is not None and entry.valid_until <= datetime.now(UTC):
        err.print("note: --valid-until is already past: the memory is recorded as expired (out of recall)")


def register(app: typer.Typer, memory_app: typer.Typer) -> None:
    """Add the operator commands to ``noemactl`` and ``noemactl memory``."""
    memory_app.command("retract")(_status_command("retract", "retract", "retracted"))
    memory_app.command("archive")(_status_command("archive", "archive", "archived"))
    memory_app.command("restore")(_status_command("restore", "restore", "restored"))
    memory_app.command("correct")(correct)
    memory_app.command("add")(add)
