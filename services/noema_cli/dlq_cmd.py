"""``noemactl dlq list|show|retry|drop``: the messages workers refused, and what an operator does with them.

Every command calls :class:`noema.adapters.deadletters.DeadLetters`, as the HTTP API's ``/v1/dead-letters``
does, so ``--json`` prints exactly what the API answers. They need NATS only (not PostgreSQL): dead
letters can be inspected while the read model is down. Retry and drop are recorded as an
``operator.action`` (``dlq_retry`` / ``dlq_drop``) naming ``operator:$USER`` and the reason.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer

from .common import DataDir, JsonOption, clip, fail, operator_name, out, print_json, run, use
from .render import print_record, when

if TYPE_CHECKING:  # the NATS adapters load when a command runs, not for --help
    from rich.table import Table

    from noema.adapters.deadletters import DeadLetterDetail, DeadLetterPage, DeadLetters
    from noema.runtime.settings import Located

__all__ = ["dlq_app", "register"]

T = TypeVar("T")

dlq_app = typer.Typer(
    help="Dead letters: messages a worker refused, with the reason. List, show, retry after a fix, drop.",
    no_args_is_help=True,
)

SEQ_HELP = "The dead letter's sequence on the dead-letter stream (the `seq` column of `noemactl dlq list`)."


def _with(work: Callable[[DeadLetters], Awaitable[T]]) -> T:
    from noema.adapters.deadletters import DeadLetters
    from noema.adapters.jetstream import EventPublisher
    from noema.runtime.wiring import connect_nats

    async def go(settings: Located) -> T:
        async with AsyncExitStack() as stack:
            nc = await connect_nats(settings, stack, "noemactl")
            topology = settings.topology
            return await work(DeadLetters(nc, topology, EventPublisher(nc, topology)))

    return run(go)


def _actor() -> str:
    return f"operator:{operator_name()}"


def _table(page: DeadLetterPage) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table("seq", "source", "dead-lettered", "original subject", "bytes", "reason", "body")
    for d in page.items:
        size = f"{d.size} (cut)" if d.truncated else str(d.size)
        table.add_row(
            str(d.seq),
            Text(d.source),
            when(d.dead_lettered_at),
            Text(d.original_subject or "-"),
            size,
            Text(clip(d.reason, 60)),
            Text(clip(d.preview, 40)),
        )
    return table


@dlq_app.command("list")
def list_(
    source: str | None = typer.Option(None, "--source", "-s", help="Only those refused by this worker."),
    since: str | None = typer.Option(
        None, metavar="DATE|TIME", help="Only those dead-lettered at or after this time."
    ),
    before: int | None = typer.Option(None, help="Only those before this sequence (the next page)."),
    limit: int = typer.Option(50, help="At most this many (1-200)."),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Dead letters, newest first: sequence, source worker, when, original subject, size, reason.

    The same listing as the API's GET /v1/dead-letters.

    Example: noemactl dlq list --source attend --since 2026-03-01
    """
    from noema.adapters.deadletters import DeadLetterQuery
    from noema.application.views import parse
    from noema.errors import InvalidQuery

    use(data_dir)
    try:
        query = parse(DeadLetterQuery, {"source": source, "since": since, "before": before, "limit": limit})
    except InvalidQuery as exc:
        fail(str(exc), 2)
    page = _with(lambda dl: dl.list(query))
    if as_json:
        print_record(page)
        return
    filtered = source is not None or since is not None or before is not None
    out.print(_table(page) if page.items else ("no matching dead letters" if filtered else "no dead letters"))
    if page.next_before is not None:
        out.print(f"older dead letters: --before {page.next_before}", highlight=False)


def _where(stream: str | None, seq: int | None) -> str:
    position = f"seq {seq}" if seq is not None else "seq unknown"
    return f"{stream} {position}" if stream else position


def _print_detail(d: DeadLetterDetail) -> None:
    from rich.text import Text

    rows = [
        ("seq", str(d.seq)),
        ("source", d.source),
        ("reason", d.reason),
        ("dead-lettered", when(d.dead_lettered_at)),
        ("original", f"{d.original_subject or '-'} ({_where(d.original_stream, d.original_seq)})"),
        ("workspace", d.workspace or "-"),
        ("deliveries", "-" if d.deliveries is None else str(d.deliveries)),
        ("size", f"{d.size} bytes" + (f", stored truncated to {d.stored_size}" if d.truncated else "")),
        ("sha256", d.sha256),
        ("utf-8", "yes" if d.utf8 else "no (invalid bytes shown as \\xNN)"),
    ]
    for name, value in rows:
        out.print(Text(f"{name + ':':15}{value}"))
    out.print(Text("body:"))
    out.print(Text(d.preview))


@dlq_app.command()
def show(
    seq: int = typer.Argument(..., help=SEQ_HELP, min=1),
    save: Path | None = typer.Option(
        None, "--save", help="Also write the stored bytes, exactly, to this file (only the start if cut)."
    ),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """One dead letter: reason, source, original subject, stream and sequence, deliveries, when, size,
    and the start of its body (invalid UTF-8 and control characters escaped; --save for the bytes).

    Example: noemactl dlq show 12 --save /tmp/dead-12.bin
    """
    use(data_dir)

    async def work(dl: DeadLetters) -> tuple[DeadLetterDetail, bytes | None]:
        return await dl.show(seq), (await dl.original(seq) if save else None)

    detail, data = _with(work)
    if save is not None and data is not None:
        try:
            save.write_bytes(data)
        except OSError as exc:
            fail(f"cannot write {save}: {exc.strerror}", 2)
    if as_json:
        print_record(detail)
    else:
        _print_detail(detail)


@dlq_app.command()
def retry(
    seq: int = typer.Argument(..., help=SEQ_HELP, min=1),
    reason: str = typer.Option("retried after a fix", "--reason", help="Why (kept in the audit log)."),
    force: bool = typer.Option(
        False, "--force", help="Re-publish it even though it still does not decode as an event."
    ),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Re-publish a dead letter's original to its original subject (after fixing what refused it),
    record an operator action dlq_retry, and remove the dead letter. Retrying twice stores it once.
    Observations only; a truncated original cannot be retried (the whole of it is not kept), nor,
    without --force, one that still does not decode as an event (it would only come back).

    Example: noemactl dlq retry 12 --reason "attend fixed in 1.4.2"
    """
    from rich.text import Text

    use(data_dir)
    result = _with(
        lambda dl: dl.retry(seq, actor=_actor(), reason=reason, now=datetime.now(UTC), force=force)
    )
    if as_json:
        print_record(result)
        return
    again = " (already re-published before: stored once)" if result.duplicate else ""
    out.print(
        Text(
            f"dead letter {seq} re-published to {result.subject}, {result.stream} seq {result.stream_seq}"
            f"{again} (operator_action {result.action_event_id})"
        )
    )
    if not result.removed:
        out.print(Text(f"note: the dead-letter stream refuses deletes, so dead letter {seq} stays listed"))


@dlq_app.command()
def drop(
    seq: int = typer.Argument(..., help=SEQ_HELP, min=1),
    reason: str = typer.Option(..., "--reason", help="Why it is dropped (kept in the audit log)."),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Delete a dead letter for good; an operator action dlq_drop records who, when and why.

    Example: noemactl dlq drop 12 --reason "test message from the load generator"
    """
    use(data_dir)
    result = _with(lambda dl: dl.drop(seq, actor=_actor(), reason=reason, now=datetime.now(UTC)))
    if as_json:
        print_record(result)
    else:
        out.print(f"dead letter {seq} dropped (operator_action {result.action_event_id})")


@dlq_app.command()
def upgrade(data_dir: Path | None = DataDir(), as_json: bool = JsonOption()) -> None:
    """Make a dead-letter stream created by an older Noema deletable (so that drop works), keeping its
    dead letters: they are moved aside and back, and get new sequences. Does nothing when it already
    is; run it again if it was interrupted. A worker dead-lettering during the move retries later.

    Example: noemactl dlq upgrade
    """
    from noema.adapters.dlq_upgrade import make_deletable
    from noema.adapters.jetstream import dead_letter_stream_config
    from noema.runtime.wiring import connect_nats

    use(data_dir)

    async def go(settings: Located) -> int | None:
        async with AsyncExitStack() as stack:
            nc = await connect_nats(settings, stack, "noemactl")
            config = dead_letter_stream_config(
                settings.topology,
                settings.duplicate_window_s,
                settings.stream_replicas,
                settings.dead_letter_policy,
            )
            return await make_deletable(nc.jetstream(), config)

    moved = run(go)
    if as_json:
        print_json({"upgraded": moved is not None, "moved": moved or 0})
    elif moved is None:
        out.print("the dead-letter stream already allows dropping dead letters: nothing to do")
    else:
        out.print(f"the dead-letter stream now allows dropping dead letters ({moved} kept, renumbered)")


def register(app: typer.Typer) -> None:
    """Add ``noemactl dlq`` to ``noemactl``."""
    app.add_typer(dlq_app, name="dlq")
