"""The one error type handlers raise: a status and a message for the caller."""

from __future__ import annotations

import msgspec

__all__ = ["ApiError", "ErrorBody"]


class ApiError(Exception):
    """Answer the request with ``status`` and ``{"error": message}`` (and ``headers``, e.g. the
    ``WWW-Authenticate`` challenge of a 401)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class ErrorBody(msgspec.Struct, frozen=True):
    """Every 4xx/5xx answer: what went wrong, in words."""

    error: str
