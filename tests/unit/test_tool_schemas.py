"""Agents see what every tool argument means: each input property of the generated schemas (the MCP
tools' ``inputSchema`` and the NATS service's endpoint metadata) carries a description."""

from __future__ import annotations

from typing import Any

import pytest

from noema.application.tools import TOOLS, input_schema
from noema_mcp.server import tool_definitions
from noema_service.operations import OPERATIONS


def _undescribed(schema: dict[str, Any]) -> list[str]:
    bodies = [schema, *schema.get("$defs", {}).values()]
    return [
        name
        for body in bodies
        for name, prop in body.get("properties", {}).items()
        if not str(prop.get("description", "")).strip()
    ]


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_every_input_field_of_every_tool_has_a_description(name: str) -> None:
    schema = input_schema(TOOLS[name])
    assert schema["properties"], "every tool takes arguments"
    assert _undescribed(schema) == []


def test_the_mcp_tool_definitions_carry_the_descriptions() -> None:
    for tool in tool_definitions():
        assert _undescribed(tool.input_schema) == [], tool.name


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_every_nats_endpoint_schema_describes_its_fields(name: str) -> None:
    schema = OPERATIONS[name].schema
    defs = schema.get("$defs", {})
    body = defs[schema["$ref"].rsplit("/", 1)[1]] if "$ref" in schema else schema
    assert _undescribed({**body, "$defs": defs}) == []
