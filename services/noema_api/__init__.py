"""The operator HTTP API (ASGI)."""
