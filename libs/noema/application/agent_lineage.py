"""``why`` as an agent may ask it (the ``why`` tool of MCP, the NATS service and the SDK): the same
chain of events as ``noemactl why`` (:func:`noema.application.lineage.why`), confined to what the
agent may read.

- Only the caller's workspace is searched: an id recorded in another workspace is not found, with
  the same message as an id recorded nowhere (the answer does not tell that it exists elsewhere).
- In strict mode a domain the caller's role may not read is confidential: an event of such a domain
  (its payload names the domain), or one that names a memory of such a domain, keeps its place in
  the tree but is shown as a bare ``cause`` step (id and parent only, no event, no decision). An id
  whose own history is confidential is not found.
- Notes are private to their agent: another agent's ``notes.updated`` is shown bare the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from noema.application.access import AccessControl, Caller
from noema.application.audit_views import Why, WhyStep
from noema.application.lineage import name_of, why
from noema.application.views import EventRecord
from noema.errors import NotFound
from noema.ports import MemoryReads

__all__ = ["why_for"]

_MEMORY_KEYS = ("memory_id", "policy_id")
"""Payload fields that say which record an event of a domain is about."""


async def why_for(
    reads: MemoryReads, access: AccessControl, caller: Caller, ref: str, limit: int = 500
) -> Why:
    """The chain of events behind ``ref`` in the caller's workspace, without what the caller may not
    read (see the module docstring). Raises :class:`~noema.errors.NotFound`."""
    answer = await why(reads, ref, caller.workspace, limit)
    readable = await access.readable_domains(caller)
    events = [s.event for s in answer.steps if s.event is not None]
    hidden_records = _confidential_records(events, readable)
    hidden = [_hidden(s.event, caller, readable, hidden_records) for s in answer.steps]
    own = [h for s, h in zip(answer.steps, hidden, strict=True) if s.event and _names(s.event, answer.id)]
    if answer.id in hidden_records or (own and all(own)):
        raise NotFound(
            f"nothing is recorded about {ref} in workspace {caller.workspace}: "
            "no event, memory, fact or policy has this id"
        )
    return Why(
        id=answer.id,
        subject=answer.subject,
        workspace=answer.workspace,
        steps=[_bare(s) if h else s for s, h in zip(answer.steps, hidden, strict=True)],
        truncated=answer.truncated,
    )


def _confidential_records(events: Iterable[EventRecord], readable: list[str] | None) -> set[str]:
    """Ids of the memories, facts and policies of domains the caller may not read."""
    if readable is None:
        return set()
    allowed = set(readable)
    return {
        e.payload[key]
        for e in events
        if _domain(e) is not None and _domain(e) not in allowed
        for key in _MEMORY_KEYS
        if isinstance(e.payload.get(key), str)
    }


def _domain(e: EventRecord) -> str | None:
    domain = e.payload.get("domain")
    return domain if isinstance(domain, str) and domain else None


def _hidden(e: EventRecord | None, caller: Caller, readable: list[str] | None, records: set[str]) -> bool:
    if e is None:
        return False
    if name_of(e.type) == "notes.updated" and e.payload.get("agent") != caller.agent:
        return True
    if readable is None:
        return False
    domain = _domain(e)
    if domain is not None and domain not in readable:
        return True
    return bool(records) and any(value in records for value in _strings(e.payload))


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _names(e: EventRecord, ref: str) -> bool:
    return e.id == ref or ref in set(_strings(e.payload))


def _bare(step: WhyStep) -> WhyStep:
    return WhyStep(id=step.id, kind="cause", parent=step.parent, link=step.link, event=None, decision=None)
