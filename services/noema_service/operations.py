"""What the service exposes: every agent tool of :mod:`noema.tools` (run by ``call_tool``, nothing
re-implemented) and ``observe``, which publishes an observation of the calling agent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

import msgspec

from noema.access import Caller
from noema.app import Noema
from noema.client import publish_observation
from noema.ids import new_id
from noema.tools import TOOLS, ToolInputError, call_tool, input_schema

__all__ = ["OPERATIONS", "ObserveInput", "Operation"]

_Short = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


@dataclass(frozen=True)
class Operation:
    """One endpoint: its name, what it is for, its input's JSON Schema and how to run it."""

    name: str
    description: str
    schema: dict[str, Any]
    run: Callable[[Noema, Caller, bytes], Awaitable[Any]]


class ObserveInput(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """observe arguments: the observation's content and optional fields; its mind and actor are the
    calling agent. Values are checked against the event schema when it is built."""

    content: str
    observation_id: _Short | None = None
    """A stable id makes a retry idempotent (``Nats-Msg-Id``)."""
    correlation_id: _Short | None = None
    channel: str = "user"
    source: str | None = None
    participants: list[str] = []
    epistemic_kind: str = "observation"
    salience: float | None = None
    importance: float | None = None
    memory_type: str | None = None
    session: str | None = None
    happened_at: datetime | None = None
    metadata: dict[str, str] = {}


async def _observe(app: Noema, who: Caller, raw: bytes) -> Any:
    try:
        args = msgspec.json.decode(raw or b"{}", type=ObserveInput)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ToolInputError(f"observe: {exc}") from None
    fields = msgspec.structs.asdict(args)
    content = fields.pop("content")
    observation_id = fields.pop("observation_id") or new_id()
    seq = await publish_observation(
        app.nc.jetstream(),
        content,
        workspace=who.workspace,
        mind=who.agent,
        actor=who.actor,
        observation_id=observation_id,
        topology=app.topology,
        **fields,
    )
    return {"observation_id": observation_id, "seq": seq}


def _tool(name: str) -> Operation:
    tool = TOOLS[name]

    async def run(app: Noema, who: Caller, raw: bytes) -> Any:
        return await call_tool(app, who, name, raw)

    return Operation(name, tool.description, input_schema(tool), run)


OPERATIONS: dict[str, Operation] = {
    **{name: _tool(name) for name in TOOLS},
    "observe": Operation(
        "observe",
        "Publish an observation of your mind (attention decides whether it becomes long-term memory); "
        "a retry with the same observation_id is stored once.",
        msgspec.json.schema(ObserveInput),
        _observe,
    ),
}
"""Every endpoint by name."""
