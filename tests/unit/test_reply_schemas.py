"""The agent service's replies (AsyncAPI, ``schemas/asyncapi.json``) and the MCP tools' results
(``outputSchema``) are one contract: both are derived from the SDK's result types
(:mod:`noema_sdk.models`, each tool's ``output``). For every tool, a reply with every property the
bus contract describes is a valid result under the outputSchema (checked by a real JSON Schema
validator), and both name the same properties wherever both describe an object's."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from noema.application.tools import TOOLS, output_schema
from noema_sdk.protocol import encode_result
from tests.unit.test_bus_contract import _component_validator, resolve

Schema = dict[str, Any]
INSTANT = "2026-03-01T09:30:00+00:00"


def _deref(node: Schema, defs: Schema) -> Schema:
    """``node`` with a top ``$ref`` followed (into the AsyncAPI document or the schema's ``$defs``)."""
    while "$ref" in node:
        ref = node["$ref"]
        node = resolve(ref) if ref.startswith("#/components/") else defs[ref.rsplit("/", 1)[1]]
    return node


def _full(node: Schema, defs: Schema, depth: int = 0) -> Any:
    """An instance with every property the schema describes (the first non-null choice of each)."""
    node = _deref(node, defs)
    if "const" in node:
        return node["const"]
    if "enum" in node:
        return node["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in node:
            choices = [c for c in node[key] if _deref(c, defs).get("type") != "null"] or node[key]
            return _full(choices[0], defs, depth)
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        if depth > 6:
            return {}
        return {k: _full(v, defs, depth + 1) for k, v in node.get("properties", {}).items()}
    if kind == "array":
        return [_full(node.get("items", {}), defs, depth + 1)] if depth <= 6 else []
    if kind == "string":
        return INSTANT if node.get("format") == "date-time" else "x"
    if kind == "integer":
        return max(1, node.get("minimum", 1))
    if kind == "number":
        return node.get("minimum", 0.5) if node.get("minimum", 0) > 0.5 else 0.5
    if kind == "boolean":
        return True
    return None


def _names(node: Schema, defs: Schema, path: str = "result") -> dict[str, set[str]]:
    """Every object's property names, by where it is (anyOf choices and array items looked into)."""
    node = _deref(node, defs)
    found: dict[str, set[str]] = {}
    if "properties" in node:
        found[path] = set(node["properties"])
        for name, sub in node["properties"].items():
            found |= _names(sub, defs, f"{path}.{name}")
    for key in ("anyOf", "oneOf"):
        for choice in node.get(key, []):
            found |= _names(choice, defs, path)
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        found |= _names(node["items"], defs, f"{path}[]")
    return found


def _reply_result(tool: str) -> Schema:
    """The AsyncAPI schema of ``tool``'s reply result."""
    payload = resolve(f"#/components/messages/{tool}.reply/payload")
    ok = next(c for c in payload["oneOf"] if c.get("properties", {}).get("ok") == {"const": True})
    result: Schema = ok["properties"]["result"]
    return result


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_reply_the_bus_contract_allows_is_a_valid_result_of_the_tool(tool: str) -> None:
    output = output_schema(TOOLS[tool])
    as_reply = _full(_reply_result(tool), {})
    assert _component_validator(f"#/components/messages/{tool}.reply/payload").is_valid(
        json.loads(encode_result(as_reply))
    )
    errors = [
        f"{list(e.absolute_path)}: {e.message}"
        for e in jsonschema.Draft202012Validator(output).iter_errors(as_reply)
    ]
    assert errors == [], f"{tool}: a reply result the outputSchema refuses"


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_both_schemas_name_the_same_properties_wherever_both_describe_an_object(tool: str) -> None:
    output = output_schema(TOOLS[tool])
    mcp = _names(output, output.get("$defs", {}))
    bus = _names(_reply_result(tool), {})
    assert {p: mcp[p] for p in mcp.keys() & bus.keys() if mcp[p] != bus[p]} == {}
    assert mcp.keys() & bus.keys() >= {"result"}
