"""``noemactl projection``: versions of the read model, rebuilt from the event stream and switched
in when caught up (:mod:`noema.composition.projections`)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from .common import DataDir, JsonOption, out, print_json, progress_bar, run, use

if TYPE_CHECKING:
    from noema.composition.projections import NatsWork
    from noema.runtime.settings import Located

__all__ = ["projection_app", "register"]

T = TypeVar("T")

projection_app = typer.Typer(
    help="Versions of the read model: rebuild one from the event stream, switch it in once it has "
    "caught up, keep the old one until dropped (docs/reliability.md#projection-versions).",
    no_args_is_help=True,
)

VERSION_HELP = "The version number (the `version` column of `noemactl projection status`)."


def _with_nats(work: NatsWork[T]) -> T:
    from noema.runtime.wiring import connect_nats

    async def go(settings: Located) -> T:
        async with AsyncExitStack() as stack:
            nc = await connect_nats(settings, stack, "noemactl")
            return await work(settings, nc)

    return run(go)


def _show(result: dict[str, Any], as_json: bool, lines: list[str]) -> None:
    if as_json:
        print_json(result)
        return
    for line in lines:
        out.print(line, highlight=False, markup=False)


@projection_app.command()
def rebuild(data_dir: Path | None = DataDir(), as_json: bool = JsonOption()) -> None:
    """Build the next version of the read model from the event stream, in a schema of its own.

    The whole stream is replayed with the live projection's code (as `noemactl replay` does, in
    bulk), the schema made durable and given the live read model's grants and row security, then
    caught up with the live read model. The live one keeps serving meanwhile. Switch it in with
    `noemactl projection switch N`.

    Example: noemactl projection rebuild && noemactl projection switch 2
    """
    from noema.composition import projections  # the read model's adapters: not for --help

    use(data_dir)
    with progress_bar("rebuilding", disable=as_json) as report:
        result = _with_nats(lambda s, nc: projections.rebuild(s, nc, report))
    _show(
        result,
        as_json,
        [
            f"version {result['version']} built in schema {result['schema']}: {result['events']} events "
            f"replayed, caught up to seq {result['position']} (live read model at {result['live_position']})",
            f"switch it in with: noemactl projection switch {result['version']}",
        ],
    )


@projection_app.command()
def status(data_dir: Path | None = DataDir(), as_json: bool = JsonOption()) -> None:
    """List the versions of the read model: state (active, ready, building, retired), schema,
    position and lag (events the stream holds beyond it).

    Example: noemactl projection status --json
    """
    from rich.table import Table

    from noema.composition import projections

    use(data_dir)
    result = _with_nats(projections.status)
    if as_json:
        print_json(result)
        return
    table = Table("version", "state", "schema", "position", "lag", "created", "switched in", "switched out")
    for v in result["versions"]:
        table.add_row(
            str(v["version"]),
            v["state"],
            v["schema"],
            "-" if v["position"] is None else str(v["position"]),
            "-" if v["lag"] is None else str(v["lag"]),
            v["created_at"][:19],
            (v["switched_in_at"] or "")[:19],
            (v["switched_out_at"] or "")[:19],
        )
    out.print(table)
    out.print(f"event stream at seq {result['stream_last_seq']}", highlight=False)


@projection_app.command()
def switch(
    version: int = typer.Argument(..., min=1, help=VERSION_HELP),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Make a version the live read model, atomically, once it has caught up.

    It is first caught up with the live read model; then the projector is held off for a moment,
    the last events are applied and the two schemas swap names in one transaction. Every process
    reads the new version from its next statement; the projector goes on from the same position.
    The version switched out is kept (retired) until dropped, and can be switched back. A version
    whose rebuild has not finished has not caught up: exit 5. An unknown version: exit 4.

    Example: noemactl projection switch 2
    """
    from noema.composition import projections

    use(data_dir)
    result = _with_nats(lambda s, nc: projections.switch(s, nc, version))
    previous = result["previous"]
    _show(
        result,
        as_json,
        [
            f"version {result['version']} is live (schema {result['schema']}, at seq {result['position']})",
            f"version {previous['version']} is retired in schema {previous['schema']} "
            f"(noemactl projection drop {previous['version']} removes it)",
        ],
    )


@projection_app.command()
def drop(
    version: int = typer.Argument(..., min=1, help=VERSION_HELP),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Drop a version that is not active (a retired one, a ready one never switched in, or an
    interrupted rebuild), schema and all. The active version cannot be dropped: exit 5.

    Example: noemactl projection drop 1
    """
    from noema.composition import projections

    use(data_dir)
    result = run(lambda s: projections.drop(s, version))
    _show(result, as_json, [f"version {result['version']} dropped (schema {result['schema']})"])


def register(app: typer.Typer) -> None:
    """Add ``projection`` to ``noemactl``."""
    app.add_typer(projection_app, name="projection")
