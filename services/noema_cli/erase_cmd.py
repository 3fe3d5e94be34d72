"""``noemactl erase``: erase personal data for good, keeping the record that it happened
(:mod:`noema.composition.erasure`, docs/privacy.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .common import DataDir, JsonOption, fail, operator_name, out, print_json, run, run_app, use

if TYPE_CHECKING:  # the application layer loads when a command runs, not for --help
    from noema.composition.erasure import ErasureReport, Scope
    from noema.composition.instance import Instance
    from noema.runtime.settings import Located

__all__ = ["register"]


def erase(
    workspace: str = typer.Option(..., "--workspace", "-w", help="Workspace the content is in."),
    subject: str | None = typer.Option(
        None,
        "--subject",
        "-s",
        help="Erase everything observed about this subject key (`observe --subject`).",
    ),
    memory: str | None = typer.Option(None, "--memory", help="Erase one memory (or fact) by id."),
    observation: str | None = typer.Option(None, "--observation", help="Erase one observation by id."),
    notes: str | None = typer.Option(
        None, "--notes", help="Erase an agent's notes, every version of them (notes carry no subjects)."
    ),
    reason: str = typer.Option(..., "--reason", help="Why (kept in the audit record, with your name)."),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Erase content for good: its data keys are destroyed (the sealed text in the event stream can
    never be read again), the read model's copies are blanked, the observations and dead letters
    deleted and the vector cache emptied; every version the read model's history holds is blanked
    too, so no read as of any point shows the content again. What stays is the audit record
    (`noemactl audit --type content.erased`): who, when, why and which items. Give exactly one of
    --subject, --memory, --observation, --notes. Then run `noemactl compact` to remove the old bytes
    from disk. An erased memory reads as `erased` and refuses every change; what an earlier erasure
    erased is not erased or counted again (exit 4 when nothing new is left).

    Example: noemactl erase -w acme --subject person:4711 --reason "GDPR Art. 17 request #812"
    """
    import msgspec

    from noema.composition.erasure import ErasureRequest
    from noema_events.catalog import SUBJECT_KEY_PATTERN
    from noema_events.envelope import NAME_PATTERN

    use(data_dir)
    targets: tuple[tuple[Scope, str | None], ...] = (
        ("subject", subject),
        ("memory", memory),
        ("observation", observation),
        ("notes", notes),
    )
    given = [(scope, value) for scope, value in targets if value]
    if len(given) != 1:
        fail("give exactly one of --subject KEY, --memory ID, --observation ID, --notes AGENT", 2)
    if not reason.strip():
        fail("--reason must say why (it is kept in the audit record)", 2)
    scope, target = given[0]
    if scope == "notes" and not re.fullmatch(NAME_PATTERN, target):
        fail(f"--notes {target!r}: an agent name is 1-64 letters, digits, _ and -", 2)
    if not re.fullmatch(SUBJECT_KEY_PATTERN, target):
        fail(f"--{scope} {target!r}: a key or id is 1-200 letters, digits and . _ : @ / + = -", 2)
    request = ErasureRequest(workspace, scope, target, reason.strip(), f"operator:{operator_name()}")

    async def work(app: Instance) -> ErasureReport:
        return await app.erase(request)

    report = run_app(work)
    if as_json:
        print_json(msgspec.to_builtins(report))
        return
    out.print(
        f"erasure {report.erasure_id} recorded at seq {report.seq}: {len(report.memory_ids)} memories, "
        f"{len(report.key_ids)} data keys, {report.observations_deleted} observations and "
        f"{report.dead_letters_deleted} dead letters deleted"
    )
    if not report.keys_destroyed:
        out.print(
            "the projector has not applied it yet: the keys are destroyed and the read model blanked "
            "when it does (see `noemactl status`)"
        )
    out.print("to remove the old bytes from disk too: noemactl compact")


def compact(data_dir: Path | None = DataDir(), as_json: bool = JsonOption()) -> None:
    """Remove the bytes of erased content from disk: PostgreSQL's tables, indexes, statistics and
    write-ahead log are rewritten (VACUUM FULL, checkpoints with WAL recycling off). JetStream already
    overwrote the deleted observations and dead letters. Run it after `noemactl erase`; tables are
    locked while they are rewritten (seconds to minutes by size), so expect a pause in projection.

    Example: noemactl erase -w acme --subject person:4711 --reason "request #812" && noemactl compact
    """
    from noema.adapters.postgres import compaction
    from noema.runtime.embedded import superuser_url

    use(data_dir)

    async def work(settings: Located) -> list[str]:
        owner = settings.database_url
        assert owner is not None, "located settings name the database"
        superuser = superuser_url(owner)
        return await compaction.compact(superuser or owner, superuser is not None)

    done = run(work)
    if as_json:
        print_json({"done": done})
        return
    for step in done:
        out.print(step)


def register(app: typer.Typer) -> None:
    app.command("erase")(erase)
    app.command("compact")(compact)
