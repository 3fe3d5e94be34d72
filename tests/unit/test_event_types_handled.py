"""Every event type of the catalog that changes the read model is handled by each place that must
know it: the PostgreSQL projector (one registered handler, tests/unit/test_projection_handlers.py,
declaring the rows it touches, which the commuting of a batch reads) and the in-memory read model (a case of
``Tables.apply``). The types come from the catalog (``noema_events.EVENT_TYPES``), not from a list
kept here: a new event type with a projector handler fails this test until its handler declares
its footprint and the in-memory read model knows it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from noema.adapters.memory import projection as memory_projection
from noema.adapters.postgres.commuting import ANYTHING
from noema.adapters.postgres.projection import PROJECTION_HANDLERS
from noema_events import EVENT_TYPES, ActivationDecayed, ContentErased, Event, decode_event

GOLDEN = Path(__file__).parents[2] / "schemas" / "golden"

READ_MODEL_TYPES = sorted(tag for tag, cls in EVENT_TYPES.items() if cls in PROJECTION_HANDLERS)
"""The catalog's current types that the projector applies to the read model's tables."""

BARRIERS: dict[type[Event], str] = {
    ActivationDecayed: "the example is an earlier release's tick (rewrite): it rewrites a whole workspace",
    ContentErased: "an erasure rewrites every row of its subjects, wherever they are",
}
"""Types whose footprint is deliberately "anything" (they commute with nothing)."""

POSTGRES_ONLY: dict[type[Event], str] = {
    ContentErased: "erasure is PostgreSQL's alone (its keyring): the in-memory model never erases",
}
"""Types the in-memory read model deliberately leaves to PostgreSQL."""


def example(tag: str) -> Event:
    """The catalog's example of ``tag`` (schemas/golden, written by ``python -m noema_service.documents``)."""
    return decode_event((GOLDEN / f"{tag}.json").read_bytes())


def cased_types(function: object) -> set[str]:
    """The class names the match statements of ``function`` have a case for."""
    tree = ast.parse(inspect.getsource(function).lstrip())  # type: ignore[arg-type]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.MatchClass):
            cls = node.cls
            names.add(cls.attr if isinstance(cls, ast.Attribute) else ast.unparse(cls))
    return names


def test_the_catalog_has_types_the_read_model_applies() -> None:
    assert len(READ_MODEL_TYPES) >= 15
    assert "notes.updated.v1" in READ_MODEL_TYPES


@pytest.mark.parametrize("tag", READ_MODEL_TYPES)
def test_each_applied_type_declares_the_rows_it_touches(tag: str) -> None:
    event = example(tag)
    if type(event) in BARRIERS:
        assert PROJECTION_HANDLERS.touches(event) is ANYTHING
    else:
        assert PROJECTION_HANDLERS.touches(event) is not ANYTHING, (
            f"{tag}: declare the rows its handler touches where it is registered (``touches=``) "
            "(until then every batch is cut at it)"
        )


@pytest.mark.parametrize("tag", READ_MODEL_TYPES)
def test_the_in_memory_read_model_applies_each_type_the_projector_applies(tag: str) -> None:
    cls = EVENT_TYPES[tag]
    if cls in POSTGRES_ONLY:
        return
    assert cls.__name__ in cased_types(memory_projection.Tables.apply), (
        f"{tag}: the projector applies it but the in-memory read model "
        "(noema.adapters.memory.projection.Tables.apply) has no case for it"
    )
