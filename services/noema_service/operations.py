"""What the service exposes: every agent tool of :mod:`noema.application.tools` (run by ``call_tool``, nothing
re-implemented) and ``observe``, which publishes an observation of the calling agent through
:meth:`noema.application.facade.Noema.observe` (its reply says whether the id was a duplicate)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from noema.application.access import Caller
from noema.application.tools import TOOLS, call_tool, decode, input_schema
from noema.composition.instance import Instance
from noema.inputs import text_dates
from noema.instants import FORMS, Instant
from noema_sdk import models

__all__ = ["OPERATIONS", "ObserveInput", "Operation"]

_Short = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


@dataclass(frozen=True)
class Operation:
    """One endpoint: its name, what it is for, its input's JSON Schema and how to run it; ``input``
    and ``result`` are the request's and the reply result's Structs, which the bus contract
    (``schemas/asyncapi.json``) publishes: the SDK's result types (:mod:`noema_sdk.models`, each tool's
    ``output``), the agent side's reading of it, so the contract and the client cannot drift apart."""

    name: str
    description: str
    schema: dict[str, Any]
    run: Callable[[Instance, Caller, bytes], Awaitable[Any]]
    input: type[msgspec.Struct]
    result: type[msgspec.Struct]


class ObserveInput(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """observe arguments: the observation's content and optional fields; its mind and actor are the
    calling agent. Values are checked against the event schema when it is built."""

    content: Annotated[str, Meta(description="What was observed (said, seen, done).")]
    observation_id: Annotated[
        _Short | None,
        Meta(
            description="A stable id makes a retry idempotent: the same id is stored once (ids are global)."
        ),
    ] = None
    correlation_id: Annotated[
        _Short | None, Meta(description="Id tying related events together (default: the observation id).")
    ] = None
    channel: Annotated[
        str,
        Meta(
            description="Where it came from: operator, user, system, tool, source or low; "
            "the channel's trust sets the memory's credibility."
        ),
    ] = "user"
    source: Annotated[
        str | None, Meta(description="Who or what produced it, e.g. a tool or document name.")
    ] = None
    participants: Annotated[list[str], Meta(description="Who took part.")] = []
    epistemic_kind: Annotated[
        str,
        Meta(description="What it is: observation, fact, claim, hypothesis, belief, inference, opinion, …"),
    ] = "observation"
    salience: Annotated[
        float | None, Meta(description="How much it stands out, 0..1 (attention estimates it when absent).")
    ] = None
    importance: Annotated[float | None, Meta(description="How much it matters, 0..1.")] = None
    memory_type: Annotated[
        str | None,
        Meta(description="Decay class, e.g. fact, decision, preference, event, task (default: observation)."),
    ] = None
    session: Annotated[str | None, Meta(description="The session it belongs to.")] = None
    happened_at: Annotated[
        Instant | None,
        Meta(description=f"When it happened, if not now (e.g. for an imported transcript): {FORMS}."),
    ] = None
    metadata: Annotated[dict[str, str], Meta(description="Free-form string attributes kept with it.")] = {}


async def _observe(app: Instance, who: Caller, raw: bytes) -> Any:
    args = decode("observe", ObserveInput, raw)  # read as the tools' input is (dates included)
    fields = msgspec.structs.asdict(args)
    return await app.observe(who, fields.pop("content"), **fields)


def _tool(name: str) -> Operation:
    tool = TOOLS[name]

    async def run(app: Instance, who: Caller, raw: bytes) -> Any:
        return await call_tool(app, who, name, raw)

    return Operation(name, tool.description, input_schema(tool), run, tool.input, tool.output)


OPERATIONS: dict[str, Operation] = {
    **{name: _tool(name) for name in TOOLS},
    "observe": Operation(
        "observe",
        "Publish an observation of your mind (attention decides whether it becomes long-term memory); "
        "a retry with the same observation_id is stored once.",
        text_dates(msgspec.json.schema(ObserveInput)),
        _observe,
        ObserveInput,
        models.ObservationReceipt,
    ),
}
"""Every endpoint by name."""
