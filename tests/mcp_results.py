"""Reading an MCP tool call's result, for the MCP tests of both tiers (in memory and on servers)."""

from __future__ import annotations

import json
from typing import Any

from mcp import types


def ok(result: types.CallToolResult) -> Any:
    """The structured result of a successful call (its text content is the same JSON)."""
    assert not result.is_error, result.content
    [content] = result.content
    assert isinstance(content, types.TextContent)
    assert json.loads(content.text) == result.structured_content
    return result.structured_content


def error(result: types.CallToolResult) -> str:
    """The message of a call that failed as a tool error."""
    assert result.is_error
    [content] = result.content
    assert isinstance(content, types.TextContent)
    assert "Traceback" not in content.text
    return content.text
