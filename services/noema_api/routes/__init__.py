"""The route table: every endpoint of the operator API, grouped by area, and its OpenAPI document
(``/openapi.json``; ``python -m noema_api.routes`` writes it to ``schemas/openapi.json``)."""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    """Write the document to ``schemas/openapi.json`` (or the path given), or with ``--check`` fail
    when the written one is stale (as ``python -m noema_service.documents --check`` does)."""
    parser = argparse.ArgumentParser(prog="python -m noema_api.routes", description=main.__doc__)
    parser.add_argument("path", nargs="?", type=Path, default=OPENAPI_PATH, help="where to write it")
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    args = parser.parse_args(argv)
    text = render(build_openapi(ENDPOINTS))
    if args.check:
        if not args.path.exists() or args.path.read_text() != text:
            print(f"stale: {args.path}; run `make openapi` and commit the result", file=sys.stderr)
            return 1
        return 0
    args.path.write_text(text)
    print(f"wrote {args.path}")
    return 0
