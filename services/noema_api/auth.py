"""Operator tokens: who is calling, and which workspace they may touch.

A tokens file holds named tokens, each scoped to one workspace or to all (``"*"``)::

    {"tokens": [{"name": "operator", "workspace": "*", "token": "noema_…"},
                {"name": "acme-ops", "workspace": "acme", "sha256": "<hex digest of the token>"}]}

A token is given either in clear (handy locally: ``noemactl api token`` prints it) or as the SHA-256
of its value, so a deployment's secret need not hold the token itself. The token's name is the actor
recorded on every operator_action the caller causes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import msgspec

from noema.errors import Kind
from noema_events.bounded import Undecodable, decode_json
from noema_events.envelope import NAME_PATTERN

from .errors import ApiError

__all__ = [
    "Principal",
    "TokenEntry",
    "Tokens",
    "TokensError",
    "ensure_tokens_file",
    "load_tokens",
    "operator_token",
]

ALL = "*"


class TokensError(ValueError):
    """The tokens file is missing or malformed; the message names the file and the problem."""


class TokenEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One operator token as written in the tokens file."""

    name: Annotated[str, msgspec.Meta(pattern=NAME_PATTERN)]
    """Letters, digits, '_' and '-': events name the token's holder ``operator:<name>``."""
    workspace: Annotated[str, msgspec.Meta(pattern=rf"^(\*|{NAME_PATTERN[1:-1]})$")] = ALL
    token: Annotated[str, msgspec.Meta(min_length=16)] | None = None
    sha256: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")] | None = None


class TokenFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The tokens file."""

    tokens: list[TokenEntry]


@dataclass(frozen=True)
class Principal:
    """An authenticated operator: the token's name and its workspace (None = every workspace)."""

    name: str
    workspace: str | None

    def check(self, workspace: str) -> None:
        """Refuse (403) anything outside the token's workspace."""
        if self.workspace is not None and workspace != self.workspace:
            raise ApiError(Kind.FORBIDDEN, f"token {self.name!r} is scoped to workspace {self.workspace!r}")

    def scope(self, workspace: str | None) -> str | None:
        """The workspace a read is limited to: the one asked for (if allowed), else the token's own."""
        if workspace is None:
            return self.workspace
        self.check(workspace)
        return workspace


def _challenge(error: str | None = None) -> dict[str, str]:
    """The ``WWW-Authenticate`` header of a 401 (RFC 6750): which scheme to use, and with a token
    that was given but is wrong, ``error="invalid_token"``."""
    value = 'Bearer realm="noema"' + (f', error="{error}"' if error else "")
    return {"WWW-Authenticate": value}


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Tokens:
    """The operator tokens the API accepts, looked up by digest."""

    def __init__(self, entries: list[TokenEntry]) -> None:
        self._by_digest: dict[str, Principal] = {}
        for e in entries:
            if (e.token is None) == (e.sha256 is None):
                raise TokensError(f"token {e.name!r} needs exactly one of `token` or `sha256`")
            digest = e.sha256 or _digest(e.token or "")
            self._by_digest[digest] = Principal(e.name, None if e.workspace == ALL else e.workspace)

    def authenticate(self, authorization: str | None) -> Principal:
        """The caller named by an ``Authorization: Bearer <token>`` header, else 401."""
        if not authorization:
            raise ApiError(
                Kind.UNAUTHENTICATED, "missing token: send `Authorization: Bearer <token>`", _challenge()
            )
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(
                Kind.UNAUTHENTICATED,
                "malformed Authorization header: expected `Bearer <token>`",
                _challenge("invalid_request"),
            )
        principal = self._by_digest.get(_digest(token.strip()))
        if principal is None:
            raise ApiError(Kind.UNAUTHENTICATED, "invalid token", _challenge("invalid_token"))
        return principal


def _decode(path: Path) -> TokenFile:
    try:
        return decode_json(path.read_bytes(), TokenFile, max_bytes=None, what=f"token file {path}")
    except FileNotFoundError:
        raise TokensError(f"no tokens file at {path}") from None
    except (OSError, Undecodable) as exc:
        raise TokensError(f"cannot read tokens file {path}: {exc}") from None


def load_tokens(path: Path) -> Tokens:
    """Read and check a tokens file."""
    return Tokens(_decode(path).tokens)


def ensure_tokens_file(path: Path, name: str = "operator") -> bool:
    """Create ``path`` with one all-workspaces token unless it exists; True when it was created.

    Safe against a concurrent creator (``noemactl up`` and ``noemactl api token`` may race): the file
    is written aside and linked into place, which fails if another process got there first.
    """
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = TokenEntry(name=name, token="noema_" + secrets.token_urlsafe(32))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(msgspec.json.format(msgspec.json.encode(TokenFile([entry]))) + b"\n")
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return True


def operator_token(path: Path) -> tuple[str, str]:
    """(name, token) of the first all-workspaces token kept in clear in ``path``."""
    for e in _decode(path).tokens:
        if e.workspace == ALL and e.token:
            return e.name, e.token
    raise TokensError(f"{path} holds no all-workspaces token in clear (only digests)")
