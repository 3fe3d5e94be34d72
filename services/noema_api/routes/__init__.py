"""The route table: every endpoint of the operator API, grouped by area, and its OpenAPI document
(``/openapi.json``; ``python -m noema_api.routes`` writes it to ``schemas/openapi.json``)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import msgspec
from starlette.responses import Response

from ..endpoint import Endpoint, Req
from ..openapi import OPENAPI_PATH, build_openapi, render
from . import audit, deadletters, erasure, explorer, knowledge, memories, operator, system

__all__ = ["ENDPOINTS", "main"]


@functools.cache
def _document() -> bytes:
    return msgspec.json.encode(build_openapi(ENDPOINTS))


async def openapi(req: Req[None, None]) -> Response:
    """The OpenAPI document of this API."""
    return Response(_document(), media_type="application/json")


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        "GET", "/openapi.json", openapi, "This document (OpenAPI 3.1)", dict[str, Any], "system", public=True
    ),
    *system.ENDPOINTS,
    *audit.ENDPOINTS,
    *memories.ENDPOINTS,
    *explorer.ENDPOINTS,
    *operator.ENDPOINTS,
    *knowledge.ENDPOINTS,
    *deadletters.ENDPOINTS,
    *erasure.ENDPOINTS,
)
"""Every endpoint, in the order the OpenAPI document lists them."""


def main() -> int:
    """Write the document to ``schemas/openapi.json`` (or the path given)."""
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else OPENAPI_PATH
    target.write_text(render(build_openapi(ENDPOINTS)))
    print(f"wrote {target}")
    return 0
