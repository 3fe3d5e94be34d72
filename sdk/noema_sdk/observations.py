"""Observation events built on the agent's side, matching ``schemas/json/observation.recorded.v1.json``
(a test compares them byte for byte with the server's own encoding), without importing the server."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec

from .errors import InvalidRequest
from .limits import MAX_CONTENT
from .models import Channel, EpistemicKind, MemoryType, ObservationFields
from .protocol import NAME_PATTERN

__all__ = ["MAX_CONTENT", "build_observation_event"]

_Unit = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
_Content = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_CONTENT)]


class _Payload(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    content: _Content
    channel: Channel = "user"
    source: str | None = None
    participants: list[str] = msgspec.field(default_factory=list)
    epistemic_kind: EpistemicKind = "observation"
    salience: _Unit | None = None
    importance: _Unit | None = None
    memory_type: MemoryType | None = None
    session: str | None = None
    happened_at: datetime | None = None
    metadata: dict[str, str] = msgspec.field(default_factory=dict)


class _Observation(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="observation.recorded.v1"
):
    id: str
    workspace: Annotated[str, msgspec.Meta(pattern=NAME_PATTERN)]
    mind: Annotated[str, msgspec.Meta(pattern=NAME_PATTERN)]
    occurred_at: datetime
    causation_id: str | None = None
    correlation_id: str
    actor: str
    payload: _Payload


_encoder = msgspec.json.Encoder()


def build_observation_event(
    content: str, *, workspace: str, mind: str, actor: str, **fields: Any
) -> tuple[str, bytes]:
    """Validate and encode an observation of ``mind``; returns its id and the event's JSON.

    ``fields`` are those of :class:`~noema_sdk.models.ObservationFields`. Raises
    :class:`~noema_sdk.errors.InvalidRequest` naming the offending field.
    """
    extra: ObservationFields = fields  # type: ignore[assignment]
    unknown = set(fields) - set(ObservationFields.__annotations__)
    if unknown:
        raise InvalidRequest(f"unknown observation field(s): {', '.join(sorted(unknown))}")
    if not content or not content.strip():
        raise InvalidRequest("content: must not be empty")
    observation_id = extra.get("observation_id") or str(uuid.uuid4())
    payload = {k: v for k, v in fields.items() if k not in ("observation_id", "correlation_id")}
    raw = {
        "type": "observation.recorded.v1",
        "id": observation_id,
        "workspace": workspace,
        "mind": mind,
        "occurred_at": datetime.now(UTC),
        "correlation_id": extra.get("correlation_id") or observation_id,
        "actor": actor,
        "payload": {"content": content, **payload},
    }
    try:
        event = msgspec.convert(raw, _Observation)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(str(exc).replace("$.payload.", "").replace("$.", "")) from None
    return observation_id, _encoder.encode(event)
