"""The error taxonomy: docs/errors.md is the table the code maps by, and every error class Noema
raises has the kind its name promises."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import nats.errors
import pytest

from noema.application.access import InsufficientMemoryPermission
from noema.application.tools import ToolInputError
from noema.client import InvalidObservation
from noema.errors import (
    SURFACES,
    Conflict,
    InvalidQuery,
    Kind,
    NoemaError,
    NotFound,
    OperationError,
    kind_of,
    markdown_table,
    public_message,
)
from noema.inputs import InvalidInput
from noema.instants import InvalidInstant
from noema.runtime.locate import NotRunning
from noema.runtime.settings import SettingsError

DOC = Path(__file__).parents[2] / "docs" / "errors.md"
_TABLE = re.compile(r"<!-- errors:begin[^>]*-->\n(.*?)<!-- errors:end -->", re.S)


def documented_table() -> str:
    """The generated table as docs/errors.md holds it."""
    found = _TABLE.search(DOC.read_text())
    assert found, f"{DOC} lost its errors:begin/end markers"
    return found.group(1)


@dataclass(frozen=True)
class Documented:
    """One row of the documented table, as the surfaces must answer it (None where it says —)."""

    http: int
    nats: int | None
    mcp_tool: str
    """``<kind>: `` (the text a failed tool call starts with) or ``HTTP <status>``."""
    mcp_request: str
    """The JSON-RPC error code of a failed request, or ``HTTP <status>``."""
    cli: int | None


def documented() -> dict[Kind, Documented]:
    """docs/errors.md's table, parsed: what a test drives every surface against."""
    rows: dict[Kind, Documented] = {}
    for line in documented_table().splitlines()[2:]:
        kind, _, http, nats, tool, rpc, cli = (c.strip() for c in line.strip("|").split("|"))
        kind = kind.strip("`")
        rows[Kind(kind)] = Documented(
            http=int(http),
            nats=None if nats == "—" else int(nats),
            mcp_tool=f"{kind}: " if tool.startswith("`isError`") else tool,
            mcp_request=rpc,
            cli=None if cli == "—" else int(cli),
        )
    return rows


def test_the_documented_table_is_the_one_the_surfaces_map_by() -> None:
    assert documented_table() == markdown_table(), (
        "docs/errors.md differs from noema.errors.SURFACES; paste the output of "
        "`python -c 'from noema.errors import markdown_table; print(markdown_table())'` between its markers"
    )


def test_every_kind_has_one_row_and_distinct_http_statuses() -> None:
    assert set(SURFACES) == set(Kind) == set(documented())
    statuses = [c.http for c in SURFACES.values()]
    assert len(set(statuses)) == len(statuses)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (OperationError("no"), Kind.INVALID),
        (ToolInputError("no"), Kind.INVALID),
        (InvalidObservation("no"), Kind.INVALID),
        (InvalidInput("no"), Kind.INVALID),
        (InvalidInstant("no"), Kind.INVALID),
        (SettingsError("no"), Kind.INVALID),
        (InvalidQuery("no"), Kind.MALFORMED),
        (NotFound("no"), Kind.NOT_FOUND),
        (Conflict("no"), Kind.CONFLICT),
        (InsufficientMemoryPermission("no"), Kind.FORBIDDEN),
        (NotRunning("no"), Kind.UNAVAILABLE),
        (ConnectionRefusedError(), Kind.UNAVAILABLE),
        (TimeoutError(), Kind.UNAVAILABLE),
        (nats.errors.NoServersError(), Kind.UNAVAILABLE),
        (asyncpg.exceptions.CannotConnectNowError("starting"), Kind.UNAVAILABLE),
        (asyncpg.InternalClientError("no codec for composite attribute type"), Kind.INTERNAL),
        (KeyError("bug"), Kind.INTERNAL),
        (ValueError("bug"), Kind.INTERNAL),
    ],
)
def test_each_error_class_has_its_kind(error: BaseException, kind: Kind) -> None:
    assert kind_of(error) is kind


def test_every_backend_failure_the_workers_retry_is_unavailable_on_every_surface() -> None:
    # noema.errors names the drivers' classes without importing a driver; they must stay the
    # adapters' (a renamed driver class would otherwise read as a bug, 500).
    from noema.adapters.errors import BACKEND_UNAVAILABLE

    for cls in BACKEND_UNAVAILABLE:
        error = cls.__new__(cls)
        assert kind_of(error) is Kind.UNAVAILABLE, cls
    assert kind_of(asyncpg.exceptions.UniqueViolationError("dup")) is Kind.INTERNAL


def test_error_classes_keep_the_bases_callers_catch() -> None:
    # Code that caught ValueError / OperationError before the taxonomy still catches them.
    refusals: tuple[type[Exception], ...] = (NotFound, Conflict, InvalidQuery, InsufficientMemoryPermission)
    for refusal in refusals:
        assert issubclass(refusal, OperationError)
    for cls in (
        OperationError,
        ToolInputError,
        InvalidObservation,
        InvalidInput,
        InvalidInstant,
        SettingsError,
    ):
        assert issubclass(cls, ValueError)
        assert issubclass(cls, NoemaError)
    assert issubclass(NotRunning, RuntimeError)


def test_a_backend_failure_or_a_bug_tells_the_caller_no_internals() -> None:
    assert public_message(NotFound("no memory abc")) == "no memory abc"
    refused = public_message(OSError("connect to 10.0.0.7:5432 refused"))
    assert "10.0.0.7" not in refused
    assert "unavailable" in refused
    assert public_message(KeyError("secret")) == "internal error"
