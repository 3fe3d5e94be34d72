"""The dispatch preamble: what an agent is told at task dispatch (requirements §8), on the fast path.

Built from exactly: every active policy as ``- [domain] rule``; the agent's own notes verbatim; and
at most five keyword-matched facts for the task (those holding more of its words first), within
about 1,200 characters, only when the task description has at least 20 characters. Full-text search
only (no query embedding), read through the :class:`~noema.ports.PreambleReads` port in one go
(PostgreSQL: one connection, one round trip per part). Which of the task's words are too common to
match on is decided within the workspace (see :mod:`noema.adapters.postgres.textsearch`), so other
tenants' data never changes a preamble. It ends by telling the agent to verify critical items with
``search_memory``.

Policies of the current repository come first. ``readable_domains`` (strict access mode, see
:meth:`noema.application.knowledge.domains.Domains.readable_domains`) limits policies and facts to what
the agent's
role may read; None means reads are not gated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from noema.ports import PreambleReads

__all__ = ["FACTS_BUDGET_CHARS", "MAX_FACTS", "MIN_TASK_CHARS", "Preamble", "build_preamble"]

MAX_FACTS = 5
FACTS_BUDGET_CHARS = 1200
MIN_TASK_CHARS = 20
CLOSING = "Verify critical items with search_memory before relying on them."


@dataclass
class Preamble:
    """The preamble text and what went into it."""

    text: str
    policies: list[str] = field(default_factory=list)
    notes: str | None = None
    facts: list[str] = field(default_factory=list)


async def build_preamble(
    reads: PreambleReads,
    workspace: str,
    agent: str,
    task: str,
    repo: str | None = None,
    readable_domains: Sequence[str] | None = None,
    *,
    at: datetime | None = None,
) -> Preamble:
    """Assemble the preamble for ``agent`` about to work on ``task``; facts are those current at
    ``at`` (the application clock's now; the system clock's when not given)."""
    parts = await reads.preamble_parts(
        workspace,
        agent,
        task if len(task.strip()) >= MIN_TASK_CHARS else None,
        repo=repo,
        readable=None if readable_domains is None else list(readable_domains),
        at=at or datetime.now(UTC),
        max_facts=MAX_FACTS,
    )
    policies = [f"- [{domain}] {rule}" for domain, rule in parts.policies]
    notes = parts.notes
    facts: list[str] = []
    used = 0
    for domain, content in parts.facts:
        line = f"- [{domain or 'general'}] {content}"
        if used + len(line) > FACTS_BUDGET_CHARS:
            break
        facts.append(line)
        used += len(line)
    sections = []
    if policies:
        sections.append("Policies:\n" + "\n".join(policies))
    if notes:
        sections.append("Your notes:\n" + notes)
    if facts:
        sections.append("Relevant facts:\n" + "\n".join(facts))
    sections.append(CLOSING)
    return Preamble("\n\n".join(sections), policies, notes, facts)
