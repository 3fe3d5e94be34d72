"""The bus contract as an AsyncAPI 3 document: every channel, who sends and who receives on it, the
rule tying a body to its subject, the dead letters and the agent service's requests and replies.
An event channel carries the current version, which is published, and the earlier versions still on
the stream, which readers receive (and upcast).

Pure: :func:`asyncapi` takes the agent service's endpoints as :class:`Endpoint` values, so this
package keeps depending on msgspec only; :mod:`noema_service.documents` reads them from the service.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from .catalog import EVENT_TYPES
from .datetimes import with_datetimes
from .envelope import NAME_PATTERN
from .upcasting import EARLIER_TYPES

__all__ = [
    "DEAD_LETTER_HEADERS",
    "DEAD_LETTER_SOURCES",
    "PREFIX_PATTERN",
    "TRACE_HEADERS",
    "Endpoint",
    "asyncapi",
    "channel_address",
]

PREFIX_PATTERN = r"^[a-z][a-z0-9_]{0,30}$"
"""``NOEMA_PREFIX``, as the settings check it."""

SUBJECTS = {
    "observation.recorded": "{prefix}.obs.{workspace}.{mind}",
    "recall.proposed": "{prefix}.obs.{workspace}.{mind}.recall",
}
EVENT_SUBJECT = "{prefix}.evt.{workspace}.{mind}.{event}"

PRODUCERS: dict[str, tuple[str, ...]] = {
    "observation.recorded": ("agent", "service", "operator"),
    "recall.proposed": ("retrieve",),
    "attention.decided": ("attend",),
    "memory.created": ("attend", "operator"),
    "memory.embedded": ("embed",),
    "memory.retrieved": ("attend", "retrieve"),
    "memory.reinforced": ("operator",),
    "activation.decayed": ("decay",),
    "memory.superseded": ("service", "conflicts", "operator"),
    "relationship.added": ("attend", "operator"),
    "fact.proposed": ("service", "operator"),
    "fact.mentioned": ("service", "conflicts", "operator"),
    "conflict.recorded": ("service", "conflicts", "operator"),
    "policy.proposed": ("service", "operator"),
    "policy.superseded": ("service", "operator"),
    "domain.created": ("service", "operator"),
    "grant.changed": ("operator",),
    "workspace.configured": ("operator",),
    "working_memory.updated": ("attend",),
    "notes.updated": ("service", "operator"),
    "operator.action": ("operator",),
    "content.erased": ("operator",),
}
"""Who publishes each event: ``agent`` (an agent's own credentials), ``service`` (the agent service
acting for an agent: knowledge operations, ``observe``), ``operator`` (``noemactl`` and the HTTP API)
or a worker by name."""

CONSUMERS: dict[str, tuple[str, ...]] = {
    "observation.recorded": ("attend", "retrieve"),
    "recall.proposed": ("attend",),
    "attention.decided": ("projector", "attend"),
    "memory.created": ("projector", "embed"),
    "fact.proposed": ("projector", "embed", "conflicts"),
    "working_memory.updated": ("projector", "attend"),
    "content.erased": ("projector",),
}
"""Who reads each channel; every event channel is read by the projector (its owner)."""

OWNERS = {"observation.recorded": "attend", "recall.proposed": "attend"}
"""The worker that dead-letters a message of the channel it cannot read (the projector for events)."""

DEAD_LETTER_SOURCES = ("attend", "projector", "embed", "conflicts", "retrieve")
"""The workers that dead-letter (``<prefix>.dlq.<source>``)."""

TRACE_HEADERS: dict[str, tuple[str, bool]] = {
    "traceparent": (
        "W3C Trace Context: the trace the message belongs to, carried from an observation to the events "
        "made from it (docs/operations.md, Traces); a malformed value is ignored",
        False,
    ),
    "tracestate": (
        "W3C Trace Context vendor state, with traceparent (printable, at most 512 characters)",
        False,
    ),
}
"""Optional on every message: observations, events, agent requests, dead letters."""

DEAD_LETTER_HEADERS: dict[str, tuple[str, bool]] = {
    "Nats-Msg-Id": ("<source>-dlq-<stream>-<seq>: a dead letter written twice is stored once", True),
    "Noema-Error": ("why it was refused (at most 1,000 characters)", True),
    "Noema-Error-Kind": (
        "invalid: the message can never be processed (fix the publisher); failed: a valid-looking "
        "message kept failing in Noema's code (most likely a bug: fix it, then `noemactl dlq retry`)",
        True,
    ),
    "Noema-Source": ("the worker that refused it", True),
    "Noema-Original-Subject": ("the subject it was published on", True),
    "Noema-Original-Stream": ("the stream it was stored in", True),
    "Noema-Original-Seq": ("its sequence in that stream", True),
    "Noema-Deliveries": ("how often JetStream had delivered it", True),
    "Noema-Dead-Lettered-At": ("when (RFC 3339, UTC, milliseconds)", True),
    "Noema-Truncated": ("'true' when only the first MiB of the original is kept", False),
    "Noema-Original-Size": ("the original's size in bytes (truncated ones only)", False),
    "Noema-Original-Sha256": ("the whole original's SHA-256, hex (truncated ones only)", False),
    **TRACE_HEADERS,  # the refused message's own, when valid
}
"""Header name → (meaning, always present) of a dead letter (``noema.adapters.jetstream.dead_letter``
writes them; a test keeps the two equal)."""

_PARAMETERS: dict[str, tuple[str, str]] = {
    "prefix": (PREFIX_PATTERN, "The deployment's subject prefix (NOEMA_PREFIX), 'noema' by default."),
    "workspace": (NAME_PATTERN, "The workspace (tenant)."),
    "mind": (
        NAME_PATTERN,
        "The mind (agent) the message concerns; '_' for a workspace-wide one (its body's mind empty).",
    ),
    "role": (NAME_PATTERN, "The calling agent's role (decides its access to domains)."),
    "agent": (NAME_PATTERN, "The calling agent."),
    "source": ("^(" + "|".join(DEAD_LETTER_SOURCES) + ")$", "The worker that refused the message."),
}

SUBJECT_RULE = (
    "The subject is part of the message. A body's `workspace` must be the subject's {workspace} and its "
    "`mind` the subject's {mind} (an empty mind is '_' in the subject), and an event's `type` must be "
    "the channel's; a body that is valid on its own but published under another subject is stored, "
    "then refused by {owner} and dead-lettered as `invalid` (NATS permissions are per subject, so a "
    "body naming another scope than its subject would bypass them)."
)


@dataclass(frozen=True)
class Endpoint:
    """One operation of the agent service: its name, what it does, its request and result Structs."""

    name: str
    description: str
    request: type[msgspec.Struct]
    result: type[msgspec.Struct]


def channel_address(tag: str) -> str:
    """The subject template of the channel carrying event ``tag`` (e.g. ``memory.created.v1``)."""
    name = tag.rsplit(".", 1)[0]
    return SUBJECTS.get(name, EVENT_SUBJECT.replace("{event}", name.replace(".", "_")))


def _parameters(*names: str, located: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        pattern, description = _PARAMETERS[name]
        out[name] = {"description": f"{description} Matches {pattern}.", "x-pattern": pattern}
        if name == "source":
            out[name]["enum"] = list(DEAD_LETTER_SOURCES)
        if name == "prefix":
            out[name]["default"] = "noema"
        if located and name in ("workspace", "mind"):
            out[name]["location"] = f"$message.payload#/{name}"
    return out


def _strings(properties: dict[str, tuple[str, bool]]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: {"type": "string", "description": d} for k, (d, _) in properties.items()},
        "required": [k for k, (_, always) in properties.items() if always],
    }


def _without_date_formats(schema: Any) -> Any:
    # The service reads dates with noema.inputs.convert, which takes more than RFC 3339 (each
    # field's description says what): a validator asserting the format must not refuse a plain date.
    if isinstance(schema, dict):
        return {k: _without_date_formats(v) for k, v in schema.items() if (k, v) != ("format", "date-time")}
    if isinstance(schema, list):
        return [_without_date_formats(v) for v in schema]
    return schema


def _components(classes: list[Any]) -> dict[str, Any]:
    _, components = msgspec.json.schema_components(classes, ref_template="#/components/schemas/{name}")
    return components


def _merge(*parts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in parts:
        for name, schema in part.items():
            assert out.get(name, schema) == schema, f"two component schemas named {name}"
            out[name] = schema
    return out


def _event_message(tag: str, cls: type) -> dict[str, Any]:
    summary = (cls.__doc__ or "").strip().splitlines()[0]
    if tag not in EVENT_TYPES:
        summary = f"An earlier version, still on the stream (read and upcast, no longer published): {summary}"
    return {
        "name": tag,
        "title": cls.__name__,
        "summary": summary,
        "contentType": "application/json",
        "headers": _strings(
            {"Nats-Msg-Id": ("the event's id: a retried publish is stored once", True), **TRACE_HEADERS}
        ),
        "payload": {"$ref": f"#/components/schemas/{cls.__name__}"},
    }


def _events(messages: dict[str, Any], channels: dict[str, Any], operations: dict[str, Any]) -> None:
    earlier: dict[str, list[str]] = {}
    for tag in sorted(EARLIER_TYPES):
        earlier.setdefault(tag.rsplit(".", 1)[0], []).append(tag)
    for tag, cls in sorted(EVENT_TYPES.items()):
        name = tag.rsplit(".", 1)[0]
        read = [*earlier.get(name, []), tag]
        for version in read:
            messages[version] = _event_message(version, EARLIER_TYPES.get(version, cls))
        owner = OWNERS.get(name, "the projector")
        channels[name] = {
            "address": channel_address(tag),
            "description": SUBJECT_RULE.replace("{owner}", owner),
            "parameters": _parameters("prefix", "workspace", "mind", located=True),
            "messages": {v: {"$ref": f"#/components/messages/{v}"} for v in read},
        }
        ref = {"$ref": f"#/channels/{name}"}
        producers = PRODUCERS[name]
        consumers = CONSUMERS.get(name, ("projector",))
        operations[f"publish.{name}"] = {
            "action": "send",
            "channel": ref,
            "summary": f"{', '.join(producers)} publish {tag}",
            "tags": [{"name": p} for p in producers],
            "messages": [{"$ref": f"#/channels/{name}/messages/{tag}"}],
        }
        operations[f"consume.{name}"] = {
            "action": "receive",
            "channel": ref,
            "summary": f"{', '.join(consumers)} read {name}"
            + (f" (every version on the stream: {', '.join(read)})" if len(read) > 1 else ""),
            "tags": [{"name": c} for c in consumers],
            "messages": [{"$ref": f"#/channels/{name}/messages/{v}"} for v in read],
        }


def _dead_letters(messages: dict[str, Any], channels: dict[str, Any], operations: dict[str, Any]) -> None:
    messages["dead_letter"] = {
        "name": "dead_letter",
        "title": "Dead letter",
        "summary": "A message a worker refused, kept with why and where it came from.",
        "description": (
            "The body is the original's bytes, exactly (anything: invalid UTF-8, NUL, deep nesting), "
            "cut to its first MiB when larger. Dead letters written by older versions carry only "
            "Noema-Error, Noema-Original-Subject and Noema-Original-Seq."
        ),
        "contentType": "application/octet-stream",
        "headers": _strings(DEAD_LETTER_HEADERS),
        "payload": {"description": "the refused message's bytes, as published"},
    }
    channels["dead_letters"] = {
        "address": "{prefix}.dlq.{source}",
        "description": (
            "Stream <PREFIX>_DEADLETTER: messages refused by a worker (docs/reliability.md, Dead letters). "
            "Kept 30 days and up to 1 GiB by default (NOEMA_DLQ_MAX_AGE, NOEMA_DLQ_MAX_BYTES)."
        ),
        "parameters": _parameters("prefix", "source"),
        "messages": {"dead_letter": {"$ref": "#/components/messages/dead_letter"}},
    }
    ref = {"$ref": "#/channels/dead_letters"}
    msgs = [{"$ref": "#/channels/dead_letters/messages/dead_letter"}]
    operations["publish.dead_letters"] = {
        "action": "send",
        "channel": ref,
        "summary": "a worker dead-letters a message it cannot handle, then acks the original",
        "tags": [{"name": s} for s in DEAD_LETTER_SOURCES],
        "messages": msgs,
    }
    operations["consume.dead_letters"] = {
        "action": "receive",
        "channel": ref,
        "summary": "operators list, show, retry and drop dead letters (noemactl dlq, /v1/dead-letters)",
        "tags": [{"name": "operator"}],
        "messages": msgs,
    }


def _service(
    endpoints: Sequence[Endpoint],
    error_codes: Sequence[int],
    messages: dict[str, Any],
    channels: dict[str, Any],
    operations: dict[str, Any],
) -> dict[str, Any]:
    """The agent service's channels and operations; returns the component schemas they need."""
    schemas: dict[str, Any] = {
        "ServiceError": {
            "title": "ServiceError",
            "description": "A refused or failed request (codes: docs/errors.md).",
            "type": "object",
            "properties": {
                "ok": {"const": False},
                "error": {
                    "type": "object",
                    "properties": {"code": {"enum": list(error_codes)}, "message": {"type": "string"}},
                    "required": ["code", "message"],
                },
            },
            "required": ["ok", "error"],
        }
    }
    error_headers = _strings(
        {
            "Nats-Service-Error": ("an error reply's message, on one line", False),
            "Nats-Service-Error-Code": ("an error reply's code", False),
        }
    )
    channels["agent_replies"] = {
        "address": None,
        "description": (
            "The requester's inbox (the reply subject NATS gives a request): for an agent's credentials "
            "below _INBOX.agent.<workspace>.<agent>."
        ),
        "messages": {},
    }
    for ep in endpoints:
        request, reply = f"{ep.name}.request", f"{ep.name}.reply"
        messages[request] = {
            "name": request,
            "title": f"{ep.name} request",
            "summary": ep.description,
            "contentType": "application/json",
            "headers": _strings(TRACE_HEADERS),
            "payload": {"$ref": f"#/components/schemas/{ep.request.__name__}"},
        }
        messages[reply] = {
            "name": reply,
            "title": f"{ep.name} reply",
            "contentType": "application/json",
            "headers": error_headers,
            "payload": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {
                            "ok": {"const": True},
                            "result": {"$ref": f"#/components/schemas/{ep.result.__name__}"},
                        },
                        "required": ["ok", "result"],
                    },
                    {"$ref": "#/components/schemas/ServiceError"},
                ]
            },
        }
        channel = f"agent.{ep.name}"
        channels[channel] = {
            "address": "{prefix}.agent.{workspace}.{role}.{agent}." + ep.name,
            "description": (
                "A request of the agent named by the subject (its identity is the subject, never the "
                "body; NATS permissions pin credentials to it). NATS micro service 'noema', queue group "
                "'noema': one instance answers."
            ),
            "parameters": _parameters("prefix", "workspace", "role", "agent"),
            "messages": {request: {"$ref": f"#/components/messages/{request}"}},
        }
        channels["agent_replies"]["messages"][reply] = {"$ref": f"#/components/messages/{reply}"}
        reply_of = {
            "channel": {"$ref": "#/channels/agent_replies"},
            "messages": [{"$ref": f"#/channels/agent_replies/messages/{reply}"}],
        }
        msgs = [{"$ref": f"#/channels/{channel}/messages/{request}"}]
        operations[f"request.{ep.name}"] = {
            "action": "send",
            "channel": {"$ref": f"#/channels/{channel}"},
            "summary": f"an agent calls {ep.name}",
            "tags": [{"name": "agent"}],
            "messages": msgs,
            "reply": reply_of,
        }
        operations[f"answer.{ep.name}"] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{channel}"},
            "summary": f"the agent service runs {ep.name} and replies",
            "tags": [{"name": "service"}],
            "messages": msgs,
            "reply": reply_of,
        }
    requests = _without_date_formats(_components(sorted({ep.request for ep in endpoints}, key=_name)))
    results = list({ep.result: None for ep in endpoints})
    return _merge(schemas, requests, with_datetimes(_components(results), results))


def _name(cls: type) -> str:
    return cls.__name__


def asyncapi(endpoints: Sequence[Endpoint], error_codes: Sequence[int]) -> dict[str, Any]:
    """The AsyncAPI 3 document of the bus (pure)."""
    messages: dict[str, Any] = {}
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    _events(messages, channels, operations)
    _dead_letters(messages, channels, operations)
    service_schemas = _service(endpoints, error_codes, messages, channels, operations)
    classes = [cls for _, cls in sorted({**EVENT_TYPES, **EARLIER_TYPES}.items())]
    schemas = _merge(with_datetimes(_components(classes), classes), service_schemas)
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Noema bus",
            "version": "1",
            "description": (
                "Noema on NATS. Every state change is an event on JetStream: observations (and recall "
                "candidates) on the observation stream <PREFIX>_OBSERVATIONS, everything else on the "
                "event stream <PREFIX>_EVENTS; refused messages on <PREFIX>_DEADLETTER; agents call the "
                "agent service by request/reply. Publish with the header Nats-Msg-Id set to the event "
                "id so a retried publish is stored once. A body must match its subject (each channel "
                "says how; its parameters' `location`). Beyond the schemas the server refuses a "
                "message larger than 1 MiB, JSON nested deeper than 32 levels, any NUL character "
                "(\\u0000) in text and an integer written with a fraction (9.0); the projector then "
                "refuses what PostgreSQL cannot store (e.g. an integer beyond its column). Date-times: "
                "publish RFC 3339 with Z or an offset; each date-time field's pattern is exactly what "
                "the server reads (it also takes a space for T, +hhmm, and no zone; it refuses a "
                "fraction rounding past the year 9999). Operations are tagged with who performs them."
            ),
        },
        "defaultContentType": "application/json",
        "channels": dict(sorted(channels.items())),
        "operations": dict(sorted(operations.items())),
        "components": {"messages": dict(sorted(messages.items())), "schemas": dict(sorted(schemas.items()))},
    }
