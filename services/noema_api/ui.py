"""The memory explorer (requirements §10): a static page over the operator API, served at ``/ui/``.

The page (``ui/index.html``, ``app.css`` and ES modules: ``app.js``, the shell, imports one module per
view and the shared ones, natively, with no build step) calls the same ``/v1`` endpoints as any other
client, with the operator's token, so it can show nothing the API would not: its search is the
agents' search. The files need no token (they hold no data); a strict Content-Security-Policy keeps
memory contents, which are untrusted text, from ever running as script.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from noema.errors import Kind

from .endpoint import error_response

__all__ = ["UI_HEADERS", "ui_routes"]

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",  # what browsers require of a module script
    ".css": "text/css; charset=utf-8",
}
_FILES = {
    entry.name: _TYPES[suffix]
    for entry in (files("noema_api") / "ui").iterdir()
    if (suffix := "." + entry.name.rpartition(".")[2]) in _TYPES
}
"""The files served: those the package ships in ``ui/`` (nothing else can be asked for by name)."""

UI_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}
"""Headers of every explorer file: scripts and styles from this origin only, no framing."""


@cache
def _read(name: str) -> bytes:
    return (files("noema_api") / "ui" / name).read_bytes()


async def _file(request: Request) -> Response:
    name = request.path_params.get("name") or "index.html"
    if name not in _FILES:
        return error_response(Kind.NOT_FOUND, f"no explorer file {name!r}")
    return Response(_read(name), media_type=_FILES[name], headers=UI_HEADERS)


async def _to_ui(request: Request) -> Response:
    return RedirectResponse("/ui/", status_code=307)


def ui_routes() -> list[Route]:
    """``/`` and ``/ui`` redirect to ``/ui/``, which serves the page, its style sheet and its modules."""
    return [
        Route("/", _to_ui, methods=["GET"]),
        Route("/ui", _to_ui, methods=["GET"]),
        Route("/ui/", _file, methods=["GET"]),
        Route("/ui/{name}", _file, methods=["GET"]),
    ]
