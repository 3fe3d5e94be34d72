"""``noemactl replay``: rebuild the read model from the event stream, compare it with the live one,
or build the state as of a sequence or a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from noema.stream_points import EXAMPLES, InvalidStreamPoint, StreamPoint, parse_stream_point

from .common import DataDir, JsonOption, clip, fail, out, print_json, progress_bar, run_app, state, use

__all__ = ["differences", "partition_lines", "register", "replay"]


def replay(
    until: str | None = typer.Option(
        None,
        "--until",
        metavar="TIME|SEQ",
        help=f"Rebuild the state as of this point instead of comparing: {EXAMPLES}. A time means the "
        "last event the event stream had stored by then (the stream's own clock, which never goes "
        "back; the events' occurred_at can).",
    ),
    until_seq: int | None = typer.Option(None, "--until-seq", min=1, help="The same as --until SEQ."),
    keep: bool = typer.Option(
        False,
        help="Keep the rebuilt schema, with its indexes, instead of dropping it (its tables are "
        "unlogged: a scratch copy, emptied if PostgreSQL crashes).",
    ),
    data_dir: Path | None = DataDir(),
    as_json: bool = JsonOption(),
) -> None:
    """Rebuild the read model from the event stream into fresh tables and compare it with the live one.

    Without --until, the live read model's position and rows are read in one snapshot and the stream
    is replayed to exactly that position, so both sides are compared at one stream sequence even
    while workers keep adding events. Prints the events applied and both checksums, and with
    NOEMA_PARTITIONS > 1 each partition's (the rows of its workspaces); when they differ, exits 1
    and names the rows and the partitions that differ (table, key, columns). With --until, builds the
    state as of that point and compares nothing (--keep to query it).

    Example: noemactl replay --until 10 --keep   (or --until 2026-03-02T10:32:00+01:00)
    """
    use(data_dir)
    if until is not None and until_seq is not None:
        fail("give --until or --until-seq, not both", 2)
    point: StreamPoint | None = until_seq
    if until is not None:
        try:
            point = parse_stream_point(until, "--until")
        except InvalidStreamPoint as exc:
            fail(str(exc), 2)
    with progress_bar("replaying", disable=as_json) as report:
        result = run_app(lambda app: app.replay(point, keep, report))
    if as_json:
        print_json(result)
    else:
        _print(result, keep)
    if "match" in result and not result["match"]:
        raise typer.Exit(1)


def _print(result: dict[str, Any], keep: bool) -> None:
    out.print(f"events replayed: {result['events']} (through seq {result['last_seq']})")
    if "until" in result:
        asked = result["until"]
        by = f", the last event stored by {asked['time']}" if "time" in asked else ""
        out.print(f"as of seq {asked['seq']}{by}", highlight=False)
    out.print(f"replay checksum: {result['checksum']}")
    if "match" in result:
        out.print(f"live checksum:   {result['live_checksum']} (live position {result['live_position']})")
        out.print("match: " + ("yes" if result["match"] else "NO"))
        if result.get("problem"):
            out.print(result["problem"], highlight=False, markup=False)
        for line in partition_lines(result["partitions"]):
            out.print(line, highlight=False, markup=False)
        for line in differences(result["differences"]):
            out.print(line, highlight=False, markup=False)
    if keep:
        out.print(
            f"kept in schema {result['schema']}; {_how_to_query(result['schema'])}",
            highlight=False,
            soft_wrap=True,
        )


def _how_to_query(schema: str) -> str:
    """How to open the kept schema with psql: the database URL is the configured one, or the
    embedded instance's, recorded (with its password) in noema.json."""
    if state.settings.database_url:
        url = '"$NOEMA_DATABASE_URL"'
    else:
        path = (state.settings.data_dir.expanduser().resolve() / "noema.json").as_posix()
        reading = f"import json; print(json.load(open({path!r}))['database_urls']['owner'])"
        url = f'"$(python3 -c "{reading}")"'
    return f"query it with: psql {url} -c 'SET search_path TO {schema}' -c '\\dt'"


def partition_lines(partitions: list[dict[str, Any]]) -> list[str]:
    """A line per partition when there are several (its checksums, and whether they match), and
    the partitions that differ."""
    if len(partitions) < 2:
        return []
    lines = [
        f"partition {p['partition']}: {p['checksum']} "
        + ("match" if p["match"] else f"DIFFERS (live {p['live_checksum']})")
        for p in partitions
    ]
    differing = [str(p["partition"]) for p in partitions if not p["match"]]
    if differing:
        lines.append(f"partitions that differ: {', '.join(differing)} of {len(partitions)}")
    return lines


def differences(found: dict[str, Any]) -> list[str]:
    """The rows that differ, a line each (and a line per differing column of a row on both sides)."""
    total = sum(found["count"].values())
    if not total:
        return []
    counts = ", ".join(f"{table} {n}" for table, n in found["count"].items())
    shown = len(found["rows"])
    lines = [f"rows that differ: {counts}" + (f" (the first {shown} below)" if shown < total else "")]
    for row in found["rows"]:
        key = " ".join(f"{name}={value}" for name, value in row["key"].items())
        where = {"live only": "only in the live read model", "replay only": "only in the replay"}
        lines.append(f"  {row['table']} {key}: {where.get(row['in'], 'different values')}")
        for column, values in row.get("columns", {}).items():
            live, replayed = (clip(json.dumps(values[side]), 60) for side in ("live", "replay"))
            lines.append(f"    {column}: live {live}, replay {replayed}")
    return lines


def register(app: typer.Typer) -> None:
    """Add ``replay`` to ``noemactl``."""
    app.command("replay")(replay)
