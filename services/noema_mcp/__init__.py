"""The MCP server (requirements §10): every agent tool of :mod:`noema.application.tools` and the
dispatch preamble,
for MCP clients over stdio or streamable HTTP, acting as the one agent it is configured for.

``noemactl mcp serve`` (or ``python -m noema_mcp``) starts it; :func:`noema_mcp.service.serve` is the
composition root and :func:`noema_mcp.server.build_server` the server itself.
"""

__all__ = ["DEFAULT_PORT", "HEALTH_PATHS", "HTTP_PATH"]

DEFAULT_PORT = 8766
"""Default port of the streamable HTTP transport (the operator API has 8765)."""
HTTP_PATH = "/mcp"
"""Where the streamable HTTP transport answers."""
HEALTH_PATHS = ("/healthz", "/readyz")
"""What the HTTP transport answers without a token, for probes: the process serves (``/healthz``);
Noema is reachable (``/readyz``: 200, else 503)."""
