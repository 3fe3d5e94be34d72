"""The API's one error mapping: a :class:`~noema.errors.Kind` becomes the status of
:data:`noema.errors.SURFACES` and the body ``{"error": message, "code": kind}``."""

from __future__ import annotations

import msgspec

from noema.errors import SURFACES, Kind

__all__ = ["ApiError", "ErrorBody"]


class ApiError(Exception):
    """Answer the request with ``kind``'s status and ``{"error": message, "code": kind}`` (and
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


class ErrorBody(msgspec.Struct, frozen=True):
    """Every 4xx/5xx answer: what went wrong, in words, and its kind (docs/errors.md)."""

    error: str
    code: Kind
