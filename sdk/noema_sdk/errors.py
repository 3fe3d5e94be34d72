"""What can go wrong when calling Noema, as exceptions an agent can act on."""

from __future__ import annotations

__all__ = [
    "InvalidRequest",
    "NoemaError",
    "NotFound",
    "PermissionDenied",
    "RateLimited",
    "RequestTimeout",
    "ServerError",
    "ServiceUnavailable",
    "error_for_code",
]


class NoemaError(Exception):
    """Base of every SDK error. ``code`` is the service's error code when it sent one."""

    code: int | None = None

    def __init__(self, message: str, *, operation: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.operation = operation


class InvalidRequest(NoemaError, ValueError):
    """The request was rejected (400 malformed, 422 invalid; any other 4xx without a class of its
    own, e.g. 409 conflict): a bad or unknown argument, a bad name (docs/errors.md)."""

    code = 400


class PermissionDenied(NoemaError):
    """The agent's role lacks the access the operation needs (403); nothing was written."""

    code = 403


class NotFound(NoemaError):
    """The operation or the thing it names does not exist (404)."""

    code = 404


class ServerError(NoemaError):
    """The service failed on a bug (500); it logged the details under the id in the message."""

    code = 500


class ServiceUnavailable(NoemaError):
    """No Noema service answered (none running, wrong prefix, NATS unreachable) or a backend it
    needs is down (503). Safe to retry later."""

    code = 503


class RateLimited(NoemaError):
    """The agent is over its rate or concurrency limit (429); nothing was done. Retry after the
    seconds the message gives (the reply's ``Retry-After`` header carries them too)."""

    code = 429


class RequestTimeout(NoemaError, TimeoutError):
    """No reply within the timeout. The operation may still have been applied."""


_BY_CODE: dict[int, type[NoemaError]] = {
    cls.code: cls
    for cls in (InvalidRequest, PermissionDenied, NotFound, RateLimited, ServerError, ServiceUnavailable)
}


def error_for_code(code: int, message: str, operation: str | None = None) -> NoemaError:
    """The exception for a service error code (unknown 4xx → InvalidRequest, others → ServerError)."""
    cls = _BY_CODE.get(code) or (InvalidRequest if 400 <= code < 500 else ServerError)
    error = cls(message, operation=operation)
    error.code = code
    return error
