"""The API's one error mapping: a :class:`~noema.errors.Kind` becomes the status of
:data:`noema.errors.SURFACES` and an RFC 9457 problem (:class:`Problem`, ``application/problem+json``)."""

from __future__ import annotations

import msgspec

from noema.errors import SURFACES, Kind, problem

__all__ = ["ApiError", "Problem"]


class ApiError(Exception):
    """Answer the request with ``kind``'s status and its :class:`Problem` (and
    ``headers``, e.g. the ``WWW-Authenticate`` challenge of a 401): the HTTP layer's own refusals
    (a malformed query, a missing token), beside the application's :class:`~noema.errors.NoemaError`."""

    def __init__(self, kind: Kind, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.headers = headers or {}

    @property
    def status(self) -> int:
        """The HTTP status of its kind."""
        return SURFACES[self.kind].http


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """Every 4xx/5xx answer: RFC 9457 problem details (``application/problem+json``), the kind of
    failure as ``code`` (docs/errors.md), the same words the NATS service, the MCP server and
    ``noemactl`` classify their errors by."""

    type: str
    """``urn:noema:error:<code>``: one per kind, stable."""
    title: str
    """The kind's title, the same for every failure of the kind."""
    status: int
    """The HTTP status, repeated."""
    detail: str
    """What went wrong in this request, in words that say what to fix."""
    code: Kind
    """The kind of failure: a stable word to branch on."""
    error: str
    """The same as ``detail``: the member clients written before problem details read."""

    @classmethod
    def of(cls, kind: Kind, detail: str, status: int | None = None) -> Problem:
        """The problem of a failure of ``kind`` (answered with ``status``, by default the kind's)."""
        return msgspec.convert(problem(kind, detail, status), cls)
