"""Command-line values converted without pydantic (noema_cli.params): the same values accepted, the
same refused with exit 2 and a message naming the option."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from noema_cli import params

params.install()
probe = typer.Typer()
seen: dict[str, Any] = {}


def _kinds(value: str) -> str:
    if value not in ("a", "b"):
        raise typer.BadParameter(f"{value!r} is not one of a, b")
    return value


def _upper(value: str) -> str:
    if not value.isascii():
        raise ValueError("ASCII only")
    return value.upper()


@probe.command()
def run(
    name: str = typer.Argument(...),
    limit: int = typer.Option(10, min=1, max=100),
    share: float = typer.Option(0.5, min=0.0, max=1.0),
    clamped: int = typer.Option(5, min=1, max=9, clamp=True),
    where: Path | None = typer.Option(None),
    tag: list[str] | None = typer.Option(None),
    kind: list[str] | None = typer.Option(None, parser=_kinds),
    shout: str | None = typer.Option(None, parser=_upper),
    strict: bool = typer.Option(False),
) -> None:
    seen.update(locals())


def _run(*args: str) -> tuple[int, str]:
    seen.clear()
    result = CliRunner().invoke(probe, list(args))
    return result.exit_code, result.output


def test_plain_values_are_converted_to_their_types() -> None:
    code, output = _run(
        "x", "--limit", " 7 ", "--share", "0.25", "--clamped", "42", "--where", "var",
        "--tag", "p", "--tag", "q", "--kind", "a", "--shout", "hey", "--strict",
    )  # fmt: skip
    assert code == 0, output
    assert seen == {
        "name": "x",
        "limit": 7,
        "share": 0.25,
        "clamped": 9,
        "where": Path("var"),
        "tag": ["p", "q"],
        "kind": ["a"],
        "shout": "HEY",
        "strict": True,
    }
    assert _run("x")[0] == 0
    assert (seen["limit"], seen["where"], seen["tag"], seen["kind"]) == (10, None, None, None)  # as typer


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--limit", "abc"), "Invalid value for '--limit': 'abc' is not an integer."),
        (("--limit", "1.5"), "Invalid value for '--limit': '1.5' is not an integer."),
        (("--limit", "0"), "Invalid value for '--limit': 0 is below the minimum, 1."),
        (("--limit", "101"), "Invalid value for '--limit': 101 is above the maximum, 100."),
        (("--share", "nan"), "Invalid value for '--share': 'nan' is not a number."),
        (("--share", "1.5"), "Invalid value for '--share': 1.5 is above the maximum, 1.0."),
        (("--kind", "c"), "Invalid value for '--kind': 'c' is not one of a, b"),
        (("--shout", "h\u00e9"), "Invalid value for '--shout': ASCII only"),
    ],
)
def test_a_bad_value_is_exit_2_naming_the_option(args: tuple[str, ...], said: str) -> None:
    code, output = _run("x", *args)
    assert code == 2
    assert said in " ".join(output.split())
    assert seen == {}  # the command never ran
