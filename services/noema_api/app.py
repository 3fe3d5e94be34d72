"""Operator HTTP API (first version): health, readiness, memory list/search/detail.

Every handler answers bad input with a 4xx and a message, never a traceback.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import asyncpg
import msgspec
from nats.aio.client import Client as NATS
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from noema.adapters.postgres import MemoryQueries

__all__ = ["create_app"]

_encoder = msgspec.json.Encoder(enc_hook=lambda o: o.isoformat() if isinstance(o, datetime) else str(o))


def _json(data: Any, status: int = 200) -> Response:
    return Response(_encoder.encode(data), status_code=status, media_type="application/json")


def _int_param(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"{name} must be an integer") from None
    if not lo <= value <= hi:
        raise HTTPException(400, f"{name} must be between {lo} and {hi}")
    return value


def create_app(pool: asyncpg.Pool, nc: NATS | None = None) -> Starlette:
    """The ASGI app over a read-model pool (and NATS, for readiness)."""
    queries = MemoryQueries(pool)

    async def healthz(request: Request) -> Response:
        return _json({"status": "ok"})

    async def readyz(request: Request) -> Response:
        problems = []
        try:
            await pool.fetchval("SELECT 1")
        except (OSError, asyncpg.PostgresError) as exc:
            problems.append(f"postgres: {exc}")
        if nc is not None and not nc.is_connected:
            problems.append("nats: not connected")
        return _json(
            {"status": "ok" if not problems else "unavailable", "problems": problems},
            200 if not problems else 503,
        )

    async def memories(request: Request) -> Response:
        unknown = set(request.query_params) - {"q", "workspace", "mind", "limit", "offset"}
        if unknown:
            raise HTTPException(400, f"unknown query parameters: {', '.join(sorted(unknown))}")
        limit = _int_param(request, "limit", 20, 1, 500)
        offset = _int_param(request, "offset", 0, 0, 1_000_000)
        q = request.query_params.get("q")
        workspace = request.query_params.get("workspace")
        if q:
            rows = await queries.search_text(q, workspace=workspace, limit=limit)
        else:
            rows = await queries.list_recent(
                workspace=workspace, mind=request.query_params.get("mind"), limit=limit, offset=offset
            )
        return _json({"items": rows})

    async def memory(request: Request) -> Response:
        row = await queries.get(request.path_params["memory_id"])
        if row is None:
            raise HTTPException(404, "no such memory")
        return _json(row)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _json({"error": exc.detail}, exc.status_code)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/v1/memories", memories),
            Route("/v1/memories/{memory_id}", memory),
        ],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
