"""An agent's own state: its private notes (requirements §5: readable by the agent and by operators only,
never turned into memories) and the view of its working memory."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from noema.application.access import Caller, InsufficientMemoryPermission
from noema.application.knowledge.context import Envelope, KnowledgeContext, require_operator
from noema.errors import OperationError
from noema.ports import ConcurrentWrite
from noema_events import NotesUpdated, NotesUpdatedPayload

__all__ = ["MAX_NOTES", "Notes"]

log = structlog.get_logger("noema.notes")

MAX_NOTES = 32_000


class Notes:
    """Agents' notes and working memory."""

    def __init__(self, ctx: KnowledgeContext) -> None:
        self._ctx = ctx

    def _notes_event(
        self, workspace: str, agent: str, notes: str, actor: str, envelope: Envelope | None = None
    ) -> NotesUpdated:
        if len(notes) > MAX_NOTES:
            raise OperationError(f"notes are limited to {MAX_NOTES} characters")
        return NotesUpdated(
            **(envelope or self._ctx.envelope(workspace, actor)),
            mind=agent,
            payload=NotesUpdatedPayload(agent=agent, notes=notes),
        )

    async def update_my_notes(self, caller: Caller, notes: str) -> None:
        """Replace the caller's own scratchpad."""
        await self._ctx.publish([self._notes_event(caller.workspace, caller.agent, notes, caller.actor)])

    async def record_observation(self, caller: Caller, content: str, *, attempts: int = 5) -> str:
        """Append a timestamped line to the caller's private notes and return it (optimistic
        concurrency on the notes subject, so concurrent appends all land). Nothing else is published:
        notes are private (requirements §5), so the text never becomes a memory other agents could search.

        An attempt that got no answer in time (a lost ack) may have been stored: from then on every
        attempt publishes that attempt's event id (its ``Nats-Msg-Id``), so it is found by the next
        read if it was stored (or stored late) or, when another version already landed on it, dropped
        by JetStream as a duplicate when published again — never appended twice. An attempt refused
        (never stored) is followed by a new version with an id, and so a key, of its own: a key an
        erasure racing the append found and destroyed is never sealed under again."""
        content = content.strip()
        if not content:
            raise OperationError("content must not be blank")
        appends = self._ctx.appends
        if appends is None:
            raise OperationError("recording an observation needs the event stream itself (JetStream)")
        envelope = self._ctx.envelope(caller.workspace, caller.actor)
        probe = self._notes_event(caller.workspace, caller.agent, "", caller.actor, envelope)
        line = f"- {self._ctx.clock():%Y-%m-%d %H:%M} {content}"
        unanswered: TimeoutError | None = None  # the last attempt's timeout, if it had one
        uncertain = False  # an attempt got no answer: it may be stored, so its id is kept
        for _ in range(attempts):
            last = await appends.last_on_subject(probe)
            current = ""
            if last is not None:
                previous = last[1]
                assert isinstance(previous, NotesUpdated)
                if uncertain and previous.id == envelope["id"]:
                    return line  # the attempt without an answer was stored
                current = previous.payload.notes
            notes = f"{current}\n{line}" if current else line
            try:
                await appends.publish_expecting(
                    self._notes_event(caller.workspace, caller.agent, notes, caller.actor, envelope),
                    last[0] if last else 0,
                )
                return line
            except ConcurrentWrite:
                unanswered = None
                if not uncertain:
                    envelope = self._ctx.envelope(caller.workspace, caller.actor)
                await asyncio.sleep(0.01)
            except TimeoutError as exc:  # stored or not: the next read tells
                unanswered, uncertain = exc, True
                log.warning("notes append unanswered; reading again", agent=caller.agent)
        if unanswered is not None:
            raise unanswered
        raise OperationError("the notes kept changing under this write; try again")

    async def set_notes(self, operator: Caller, agent: str, notes: str, *, reason: str = "") -> None:
        """An operator replaces an agent's notes."""
        require_operator(operator, "setting another agent's notes")
        Caller(operator.workspace, agent)
        await self._ctx.publish(
            [self._notes_event(operator.workspace, agent, notes, operator.actor)],
            (operator, "correct", None, reason or f"notes of {agent} set by an operator"),
            {"notes_of": agent},
        )

    async def get_notes(self, caller: Caller, agent: str | None = None) -> str:
        """An agent's notes: readable by that agent and by operators only."""
        agent = agent or caller.agent
        Caller(caller.workspace, agent)  # a valid agent name, or a clear error
        if agent != caller.agent and not caller.operator:
            raise InsufficientMemoryPermission(f"notes are private: {caller.agent!r} cannot read {agent!r}'s")
        return await self._ctx.reads.notes(caller.workspace, agent) or ""

    async def working_memory(self, workspace: str, mind: str) -> dict[str, Any]:
        """A mind's working memory with each item's content and its memory's current status (a
        memory retracted or archived since it entered stays held until it decays out, marked so),
        and when its content was erased, if it was."""
        row = await self._ctx.reads.working_memory(workspace, mind)
        if row is None:
            return {"workspace": workspace, "mind": mind, "capacity": None, "items": [], "updated_at": None}
        items = [dict(i) for i in row["items"]]
        held = await self._ctx.reads.memory_statuses([i["memory_id"] for i in items])
        for item in items:
            content, status, erased_at = held.get(item["memory_id"], (item.get("gist", ""), "unknown", None))
            item["content"], item["status"], item["erased_at"] = content, status, erased_at
        return {
            "workspace": workspace,
            "mind": mind,
            "capacity": row["capacity"],
            "items": items,
            "updated_at": row["updated_at"],
        }
