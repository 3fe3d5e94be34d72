"""The wire contract between agents and the Noema service: subjects, reply envelopes, error headers.

The service imports this module too, so both sides agree by construction.

An agent operation is a NATS request on ``<prefix>.agent.<workspace>.<role>.<agent>.<operation>``
with a JSON object of arguments. The caller's identity is in the subject, not in the payload, so
NATS subject permissions can pin a set of credentials to one identity (``docs/sdk.md``).

A reply is ``{"ok": true, "result": ...}``, or ``{"ok": false, "error": {"code": 403,
"message": "..."}}`` with the NATS micro error headers (``Nats-Service-Error``,
``Nats-Service-Error-Code``) set as well.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

__all__ = [
    "AGENT_TOKEN",
    "ERROR_CODE_HEADER",
    "ERROR_HEADER",
    "NAME_PATTERN",
    "QUEUE_GROUP",
    "SERVICE_NAME",
    "AgentAddress",
    "ErrorBody",
    "Reply",
    "agent_subject",
    "agent_user",
    "encode_error",
    "encode_result",
    "endpoint_subject",
    "inbox_prefix",
    "observation_subject",
    "parse_agent_subject",
]

SERVICE_NAME = "noema"
"""The NATS micro service name: ``$SRV.PING.noema``, ``$SRV.INFO.noema``, ``$SRV.STATS.noema``."""
QUEUE_GROUP = "noema"
"""Every instance joins this queue group, so each request is handled by exactly one of them."""
AGENT_TOKEN = "agent"
ERROR_HEADER = "Nats-Service-Error"
ERROR_CODE_HEADER = "Nats-Service-Error-Code"
NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
"""Workspaces, roles and agents: also valid as single NATS subject tokens."""
_NAME = re.compile(NAME_PATTERN)


class AgentAddress(msgspec.Struct, frozen=True):
    """Who calls which operation, as read from a subject."""

    workspace: str
    role: str
    agent: str
    operation: str


def _check(kind: str, value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(f"{kind} must be 1-64 letters, digits, '_' or '-' (got {value!r})")
    return value


def agent_subject(prefix: str, workspace: str, role: str, agent: str, operation: str) -> str:
    """The subject an agent sends ``operation`` requests to."""
    parts = (("workspace", workspace), ("role", role), ("agent", agent), ("operation", operation))
    return ".".join([prefix, AGENT_TOKEN, *(_check(kind, value) for kind, value in parts)])


def agent_user(workspace: str, agent: str) -> str:
    """The NATS user ``noemactl agent add`` creates for an agent (the server's own rule)."""
    return f"agent.{workspace}.{agent}"


def inbox_prefix(user: str) -> str:
    """The reply-inbox prefix the server lets ``user`` subscribe below (and nobody else)."""
    return f"_INBOX.{user}"


def endpoint_subject(prefix: str, operation: str) -> str:
    """The wildcard subject the service listens on for ``operation`` (any workspace, role, agent)."""
    return f"{prefix}.{AGENT_TOKEN}.*.*.*.{operation}"


def parse_agent_subject(subject: str) -> AgentAddress:
    """Read the caller's identity and the operation from a request subject."""
    tokens = subject.split(".")
    if len(tokens) != 6 or tokens[1] != AGENT_TOKEN:
        raise ValueError(f"not an agent subject: {subject!r}")
    _, _, workspace, role, agent, operation = tokens
    return AgentAddress(workspace, role, agent, operation)


def observation_subject(prefix: str, workspace: str, mind: str) -> str:
    """Where an observation of ``mind`` is published (the observation stream captures it)."""
    return f"{prefix}.obs.{_check('workspace', workspace)}.{_check('mind', mind)}"


class ErrorBody(msgspec.Struct, frozen=True):
    """An error reply's code (HTTP-like, per kind in docs/errors.md: 400, 403, 404, 409, 422, 500,
    503) and what went wrong."""

    code: int
    message: str


class Reply(msgspec.Struct, frozen=True):
    """A reply envelope; ``result`` stays raw until the caller decodes it to its own type."""

    ok: bool
    result: msgspec.Raw = msgspec.Raw(b"null")
    error: ErrorBody | None = None


_encoder = msgspec.json.Encoder()


def encode_result(result: Any) -> bytes:
    """A success reply."""
    return _encoder.encode({"ok": True, "result": result})


def encode_error(code: int, message: str) -> tuple[bytes, dict[str, str]]:
    """An error reply: its body and its NATS micro error headers (one line, bounded)."""
    header = " ".join(message.split())[:1024]
    body = _encoder.encode({"ok": False, "error": {"code": code, "message": message}})
    return body, {ERROR_HEADER: header, ERROR_CODE_HEADER: str(code)}
