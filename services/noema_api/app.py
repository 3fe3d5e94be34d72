"""The operator HTTP API as an ASGI app, assembled from the route table (:mod:`noema_api.routes`).

Every API answer is JSON (the memory explorer's page at ``/ui/`` and ``/metrics`` are the
exceptions). Bad input gets a 4xx whose body is an RFC 9457 problem with the kind as ``code``
(docs/errors.md); a body that is not JSON a 415; a 500 only ever means a bug, and is logged with
its traceback.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from noema.adapters.asgi import DEFAULT_MAX_BODY, BodyLimit, JsonBodies, RequestLog
from noema.errors import KIND_BY_HTTP_STATUS, Kind

from .endpoint import Api, error_response, routes
from .routes import ENDPOINTS
from .ui import ui_routes

__all__ = ["Api", "create_app"]


def create_app(api: Api, max_body: int = DEFAULT_MAX_BODY) -> Starlette:
    """The ASGI app over ``api``'s connections, tokens and clock; a request body larger than
    ``max_body`` bytes is refused (413) before it is read. Every request is logged and counted into
    the application layer's metrics, which ``/metrics`` serves (no token: counts, no content)."""
    metrics = api.app.metrics

    async def scrape(request: Request) -> Response:
        body, content_type = metrics.exposition(request.headers.get("accept"))
        return Response(body, headers={"Content-Type": content_type})

    async def http_error(request: Request, exc: Exception) -> Response:
        # Routing errors (unknown path, wrong method) in the same shape as everything else; a 405
        # keeps its status (it has no kind of its own: the request is malformed for that path).
        assert isinstance(exc, HTTPException)
        kind = KIND_BY_HTTP_STATUS.get(exc.status_code, Kind.MALFORMED)
        return error_response(kind, str(exc.detail), exc.headers, status=exc.status_code)

    return Starlette(
        routes=[*routes(ENDPOINTS, api), *ui_routes(), Route("/metrics", scrape, methods=["GET"])],
        middleware=[
            Middleware(RequestLog, metrics=metrics),
            Middleware(JsonBodies),
            Middleware(BodyLimit, max_bytes=max_body, setting="NOEMA_API_MAX_BODY"),
        ],
        exception_handlers={HTTPException: http_error},
    )
