"""noema.inputs.convert: a pattern's ``$`` means the end of the text, as in JSON Schema."""

from __future__ import annotations

from typing import Annotated

import msgspec
import pytest

from noema.client import InvalidObservation, build_observation
from noema.inputs import InvalidInput, anchored_fields, convert
from noema_events.envelope import Name


class Query(msgspec.Struct, frozen=True, kw_only=True):
    workspace: Name
    mind: Name | None = None
    note: Annotated[str, msgspec.Meta(pattern=r"\S")] = "x"


def test_only_fields_with_an_anchored_pattern_are_checked_for_a_final_line_break() -> None:
    assert anchored_fields(Query) == {"workspace", "mind"}
    assert convert(Query, {"workspace": "acme", "note": "ends with a line\n"}).note.endswith("\n")


@pytest.mark.parametrize("data", [{"workspace": "acme\n"}, {"workspace": "acme", "mind": "ops\n"}])
def test_a_final_line_break_does_not_pass_an_anchored_pattern(data: dict[str, str]) -> None:
    with pytest.raises(InvalidInput, match="must not end with a line break"):
        convert(Query, data)


def test_an_observation_for_a_workspace_with_a_final_line_break_is_refused() -> None:
    with pytest.raises(InvalidObservation, match="workspace 'acme\\\\n' must not end with a line break"):
        build_observation("x", workspace="acme\n", mind="ops")
