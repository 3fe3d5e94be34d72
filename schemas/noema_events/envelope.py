"""The event envelope shared by every event on the bus (requirements §9)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from .vocabulary import NAME_PATTERN

__all__ = ["NAME_PATTERN", "Event", "Name"]

Name = Annotated[str, msgspec.Meta(pattern=NAME_PATTERN, description="workspace or mind name")]


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", forbid_unknown_fields=False):
    """Envelope of every event; concrete events subclass it with a stable tag and a ``payload``.

    The tag (``"memory.created.v1"``) is the event's type *and* schema version. It is written
    explicitly on every class and never derived from a module path, so renaming code never
    renames events. Unknown fields are allowed so that old readers skip fields added later.
    """

    id: str
    """Unique event id (UUID); also the ``Nats-Msg-Id`` so retried publishes are stored once."""
    workspace: Name
    """Tenant the event belongs to."""
    mind: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{0,64}$")] = ""
    """Mind/agent the event concerns; empty for workspace-wide events."""
    occurred_at: datetime
    """When it happened (UTC, timezone-aware)."""
    causation_id: str | None = None
    """The event or observation that caused this one."""
    correlation_id: str
    """Shared by every event descending from the same originating observation or command."""
    actor: str
    """Who or what produced it: a worker name, an agent id, ``operator:<name>``."""

    @property
    def type(self) -> str:
        """The full tag, e.g. ``memory.created.v1``."""
        return str(type(self).__struct_config__.tag)

    @property
    def name(self) -> str:
        """The event name without its version, e.g. ``memory.created``."""
        return self.type.rsplit(".", 1)[0]

    @property
    def version(self) -> int:
        """The schema version carried by the tag."""
        return int(self.type.rsplit(".v", 1)[1])
