"""What every ``noemactl`` command shares: consoles, the located settings, running async work and
turning failures into messages with their kind's exit code (:data:`noema.errors.SURFACES`, the table
of docs/errors.md: 1 failed, 2 bad input, 3 not permitted, 4 not found, 5 conflict, 6 unavailable)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import typer

from noema.errors import SURFACES, Kind, NoemaError, OperationError, kind_of, public_message
from noema.stream_points import EXAMPLES, InvalidStreamPoint, parse_stream_point

if TYPE_CHECKING:
    from rich.console import Console

    # The application layer (asyncpg, nats, NumPy), and even the settings, the locator and the
    # access rules, load when a command runs, not for --help: what a command module imports at its
    # top is what `noemactl --help` waits for (issue 32: its start-up).
    from noema.application.access import Caller
    from noema.application.memory_reads import MemoryReader
    from noema.composition.instance import Instance
    from noema.runtime.settings import Located, Settings

__all__ = [
    "AsOfOption",
    "DataDir",
    "JsonOption",
    "caller",
    "clip",
    "completes",
    "err",
    "escape",
    "exit_code",
    "fail",
    "fail_for",
    "operator_name",
    "out",
    "print_json",
    "progress_bar",
    "read_memory",
    "run",
    "run_app",
    "run_read",
    "state",
    "use",
]

T = TypeVar("T")
R = TypeVar("R", bound="MemoryReader")


class _Console:
    """A rich Console made on first use: `--help` and an answer printed as JSON to a pipe load no
    rich (issue 32: a keyword search's start-up)."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def console(self) -> Console:
        """The Console itself, for what rich is handed (``Progress(console=...)`` enters it as a
        context manager, which goes past ``__getattr__``)."""
        if self._console is None:
            from rich.console import Console

            # Piped output (scripts, CI logs) gets wide tables instead of Rich's 80-column default.
            stream = sys.stderr if self._stderr else sys.stdout
            self._console = Console(stderr=self._stderr, width=None if stream.isatty() else 160)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console(), name)


def _real(console: Console) -> Console:
    """``out`` or ``err`` as the rich Console itself, to hand to rich."""
    return console.console() if isinstance(console, _Console) else console


out = cast("Console", _Console(stderr=False))
err = cast("Console", _Console(stderr=True))


def escape(markup: str) -> str:
    """:func:`rich.markup.escape` (loaded on first use)."""
    from rich.markup import escape as escaped

    return escaped(markup)


def _styled() -> bool:
    """Whether rich would colour standard output: a terminal, or FORCE_COLOR / TTY_COMPATIBLE=1
    set (rich's own rules); otherwise JSON is printed as rich prints it uncoloured, without it."""
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    force = os.environ.get("FORCE_COLOR")
    return force != "" if force is not None else sys.stdout.isatty()


DATA_DIR_HELP = "Data folder of the embedded instance (default: $NOEMA_DATA_DIR or ./var)."


def DataDir() -> Any:
    """The ``--data-dir`` option, accepted before or after the command name."""
    return typer.Option(None, "--data-dir", help=DATA_DIR_HELP)


def use(data_dir: Path | None) -> None:
    """Apply a ``--data-dir`` given after the command name."""
    if data_dir is not None:
        state.settings = replace(state.settings, data_dir=data_dir)


class _State:
    settings: Settings
    json: bool = False
    """--json was given: errors, too, are printed as JSON (on stderr)."""
    as_of: dict[str, Any] | None = None
    """The point a read given --as-of answered for (``{"seq", "time"}``): JSON answers carry it."""


state = _State()


def fail(message: str, code: int = 1) -> NoReturn:
    """Print an error (a JSON object ``{"error", "exit_code"}`` under ``--json``) and exit with ``code``."""
    if state.json:
        print(json.dumps({"error": message, "exit_code": code}), file=sys.stderr)
    else:
        err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def exit_code(kind: Kind) -> int:
    """The exit status of a failure of ``kind``: the CLI's one error mapping."""
    return SURFACES[kind].cli or SURFACES[Kind.INTERNAL].cli or 1


def fail_for(exc: BaseException) -> NoReturn:
    """Report ``exc`` by its kind and exit with the kind's code; a bug (``internal``) is re-raised,
    so that its traceback shows."""
    kind = kind_of(exc)
    if kind is Kind.INTERNAL:
        raise exc
    message = public_message(exc, kind)
    if kind is Kind.FORBIDDEN:
        message = f"not permitted: {message}"
    elif kind is Kind.UNAVAILABLE and not isinstance(exc, NoemaError):
        message = f"cannot reach Noema ({exc.__class__.__name__}: {exc}); is `noemactl up` running?"
    fail(message, exit_code(kind))


def run(factory: Callable[[Located], Coroutine[Any, Any, T]], identity: str = "operator") -> T:
    """Locate the running instance and run an async command, turning known failures into messages.

    ``identity``: whose NATS credentials it uses on the embedded server (the operator's by default).
    """
    import asyncio  # with ssl and logging: not for --help

    from noema.runtime.locate import locate

    try:
        return asyncio.run(factory(locate(state.settings, identity)))
    except Exception as exc:
        fail_for(exc)


def print_json(data: Any) -> None:
    """Print ``data`` as JSON; the answer of a read given --as-of says the point it reflects (an
    object gains ``as_of``, a list becomes ``{"as_of", "items"}``)."""
    if state.as_of is not None:
        data = (
            {**data, "as_of": state.as_of}
            if isinstance(data, dict)
            else {"as_of": state.as_of, "items": data}
        )

    def plain(o: Any) -> str:
        return o.isoformat() if isinstance(o, datetime) else str(o)

    if _styled():
        out.print_json(json.dumps(data, default=plain))
    else:  # what rich prints there (rich.json.JSON: indent 2, no ASCII escapes), without loading it
        print(json.dumps(data, default=plain, indent=2, ensure_ascii=False))


AS_OF_HELP = (
    f"Answer as of this point: {EXAMPLES}. The state after that stream sequence (a time: the last "
    "event stored by then), read with that moment as now from the read model's history."
)


def AsOfOption() -> Any:
    """The ``--as-of TIME|SEQ`` option of every read."""
    return typer.Option(None, "--as-of", metavar="TIME|SEQ", help=AS_OF_HELP)


@contextlib.contextmanager
def progress_bar(description: str, disable: bool = False) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr; yields ``report(done, total)``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=_real(err),
        disable=disable,
    ) as progress:
        task = progress.add_task(description, total=None)

        def report(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield report


def _json_mode(value: bool) -> bool:
    state.json = value
    return value


def JsonOption() -> Any:
    """The ``--json`` option (read before the others, so that their errors are JSON too)."""
    return typer.Option(
        False,
        "--json",
        help="Print JSON instead of a table (errors too).",
        is_eager=True,
        callback=_json_mode,
    )


def run_app(
    work: Callable[[Instance], Coroutine[Any, Any, T]], as_of: str | None = None, *, reads_only: bool = False
) -> T:
    """Run ``work`` against the running instance's application layer; with ``as_of`` (a --as-of
    value), against its state as of that point (:meth:`noema.application.facade.Noema.as_of`),
    saying which point in front of a table and in the JSON. ``reads_only``: ``work`` only reads
    the read model, so the instance opens PostgreSQL alone, without connecting to NATS or loading
    nats-py (a search's start-up; an as-of read still connects: its point is found in the stream)."""
    point = None
    if as_of is not None:
        try:
            point = parse_stream_point(as_of, "--as-of")
        except InvalidStreamPoint as exc:
            fail(str(exc), 2)

    from noema.adapters.postgres.tenancy import ALL_WORKSPACES
    from noema.composition.instance import Instance

    async def go(settings: Located) -> T:
        # The operator's own CLI reads every workspace (each command names the one it asks about).
        opened = Instance.open(
            settings,
            name="noemactl",
            pool_size=2,
            workspace=ALL_WORKSPACES,
            nats=not reads_only or point is not None,
        )
        async with opened as app:
            if point is None:
                return await work(app)
            view = await app.as_of(point)
            assert view.point is not None
            state.as_of = view.point.describe()
            if not state.json:
                out.print(f"as of seq {view.point.seq} ({view.point.time.isoformat()})", highlight=False)
            return await work(view)

    return run(go)


def run_read(
    read: Callable[[Instance], Coroutine[Any, Any, T]],
    workspace: str | None,
    empty: Callable[[T], bool],
    as_of: str | None = None,
) -> tuple[T, str]:
    """Run a read of the read model like :func:`run_app` (``reads_only``); also returns what to add
    to an empty answer when nothing was ever recorded in ``workspace`` (a typo looks like lost data
    otherwise), else ``""``."""

    async def go(app: Instance) -> tuple[T, str]:
        return await _noted(app, read, workspace, empty)

    return run_app(go, as_of, reads_only=True)


def read_memory(
    read: Callable[[MemoryReader], Coroutine[Any, Any, T]],
    workspace: str | None,
    empty: Callable[[T], bool],
    as_of: str | None = None,
) -> tuple[T, str]:
    """:func:`run_read` for a read of memory alone (a search, the listing, the timeline): over a
    reader of the read model (:func:`noema.composition.reader.open_reader`), which loads none of
    the rest of the application (a search's start-up, issue 32); as of a point, over the instance's
    view of it, as :func:`run_read` reads."""
    if as_of is not None:
        return run_read(read, workspace, empty, as_of)
    from noema.adapters.postgres.tenancy import ALL_WORKSPACES
    from noema.composition.reader import open_reader

    async def go(settings: Located) -> tuple[T, str]:
        # The operator's own CLI reads every workspace (each command names the one it asks about).
        async with open_reader(settings, name="noemactl", pool_size=2, workspace=ALL_WORKSPACES) as reader:
            return await _noted(reader, read, workspace, empty)

    return run(go)


async def _noted(
    app: R, read: Callable[[R], Coroutine[Any, Any, T]], workspace: str | None, empty: Callable[[T], bool]
) -> tuple[T, str]:
    """``read`` of ``app``, and what to add to its answer when it is empty (:func:`run_read`)."""
    result = await read(app)
    if not workspace or not empty(result) or await app.workspace_exists(workspace):
        return result, ""
    return result, f" (nothing was ever recorded in workspace {workspace}: is the name right?)"


def operator_name() -> str:
    """The operator running the CLI ($USER, made a valid name; ``cli`` when unknown)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "-", os.environ.get("USER") or "cli")[:64]
    return name or "cli"


def caller(workspace: str, agent: str | None = None, role: str | None = None) -> Caller:
    """As the agent named by --agent (with --role), else as the operator running the CLI."""
    from noema.application.access import Caller

    try:
        if agent is None and role is None:
            return Caller(workspace, operator_name(), "operator", operator=True)
        return Caller(workspace, agent or operator_name(), role or "agent")
    except OperationError as exc:
        fail_for(exc)


def completes(values: Sequence[str] | Callable[[], Sequence[str]]) -> Callable[[str], list[str]]:
    """The ``autocompletion`` of an option that takes one of ``values``: those starting with what
    was typed (``noemactl memory search x --mode <TAB>``). ``values`` may be a function that
    returns them, called when completing (what the command tree need not load for --help)."""

    def complete(incomplete: str) -> list[str]:
        choices = values() if callable(values) else values
        return [value for value in choices if value.startswith(incomplete)]

    return complete


def clip(text: str, width: int = 70) -> str:
    """One line of at most ``width`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
