"""An observation, validated up front: what every surface and the publisher client build before they
publish one (:mod:`noema.client` publishes it; :meth:`noema.application.facade.Noema.observe` through
the application's :class:`noema.ports.ObservationSink`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

import msgspec

from noema.errors import Kind, NoemaError
from noema.ids import new_id
from noema_events import ObservationRecorded
from noema_events.messages import humanize

__all__ = ["InvalidObservation", "Stored", "build_observation"]


class InvalidObservation(NoemaError, ValueError):
    """The observation would be rejected; the message says which field and why."""

    kind = Kind.INVALID


def build_observation(
    content: str,
    *,
    workspace: str,
    mind: str,
    channel: str = "user",
    actor: str | None = None,
    observation_id: str | None = None,
    correlation_id: str | None = None,
    occurred_at: datetime | None = None,
    source: str | None = None,
    participants: Sequence[str] = (),
    epistemic_kind: str = "observation",
    salience: float | None = None,
    importance: float | None = None,
    memory_type: str | None = None,
    session: str | None = None,
    happened_at: datetime | None = None,
    metadata: Mapping[str, str] | None = None,
    subjects: Sequence[str] = (),
) -> ObservationRecorded:
    """Build and validate an observation event (raises :class:`InvalidObservation`)."""
    if not content or not content.strip():
        raise InvalidObservation("content must not be blank")
    if "\x00" in content:
        raise InvalidObservation("content must not contain NUL characters")
    if not mind:
        raise InvalidObservation("mind must not be empty (observations belong to a mind)")
    for name, value in (("workspace", workspace), ("mind", mind)):
        # The schema's pattern lets a final line break through (Python's `$`); a subject cannot hold it.
        if value.endswith("\n"):
            raise InvalidObservation(f"{name} {value!r} must not end with a line break")
    obs_id = observation_id or new_id()
    raw: dict[str, Any] = {
        "type": "observation.recorded.v1",
        "id": obs_id,
        "workspace": workspace,
        "mind": mind,
        "occurred_at": occurred_at or datetime.now(UTC),
        "correlation_id": correlation_id or obs_id,
        "actor": actor or mind,
        "payload": {
            "content": content,
            "channel": channel,
            "source": source,
            "participants": list(participants),
            "epistemic_kind": epistemic_kind,
            "salience": salience,
            "importance": importance,
            "memory_type": memory_type,
            "session": session,
            "happened_at": happened_at,
            "metadata": dict(metadata or {}),
            "subjects": list(subjects),
        },
    }
    try:
        # convert() (unlike the constructor) enforces the schema's constraints.
        return msgspec.convert(raw, ObservationRecorded)
    except msgspec.ValidationError as exc:
        raise InvalidObservation(humanize(exc, raw, struct=ObservationRecorded)) from exc


class Stored(NamedTuple):
    """Where a published observation is: its stream sequence, and whether the stream already held an
    observation of its id (within the duplicate window; it was then not stored again)."""

    seq: int
    duplicate: bool
