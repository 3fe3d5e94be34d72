"""The dispatch preamble: what an agent is told at task dispatch (requirements §8), on the fast path.

Built from exactly: every active policy as ``- [domain] rule``; the agent's own notes verbatim; and
at most five keyword-matched facts for the task, within about 1,200 characters, only when the task
description has at least 20 characters. Full-text search only (no query embedding), one round trip
per part. Which of the task's words are too common to match on is decided within the workspace (see
:mod:`noema.adapters.postgres.textsearch`), so other tenants' data never changes a preamble. It ends
by telling the agent to verify critical items with ``search_memory``.

Policies of the current repository come first. ``readable_domains`` (strict access mode, see
:meth:`noema.knowledge.domains.Domains.readable_domains`) limits policies and facts to what the agent's
role may read; None means reads are not gated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg

from .adapters.postgres.textsearch import selective_query

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
    pool: asyncpg.Pool,
    workspace: str,
    agent: str,
    task: str,
    repo: str | None = None,
    readable_domains: Sequence[str] | None = None,
) -> Preamble:
    """Assemble the preamble for ``agent`` about to work on ``task``."""
    readable = list(readable_domains) if readable_domains is not None else None
    async with pool.acquire() as conn:
        policies = [
            f"- [{r['domain']}] {r['rule']}"
            for r in await conn.fetch(
                "SELECT domain, rule FROM policies WHERE workspace = $1 AND active "
                "AND ($2::text[] IS NULL OR domain = ANY($2::text[])) "
                "ORDER BY (repo IS NOT DISTINCT FROM $3) DESC, domain, origin_seq",
                workspace,
                readable,
                repo,
            )
        ]
        notes = await conn.fetchval(
            "SELECT notes FROM agent_notes WHERE workspace = $1 AND agent = $2", workspace, agent
        )
        facts: list[str] = []
        query = await selective_query(conn, task, workspace) if len(task.strip()) >= MIN_TASK_CHARS else None
        # A task made only of common words would rank most facts: nothing specific to add then.
        if query is not None and not query.broad:
            rows = await conn.fetch(
                """SELECT m.domain, m.content FROM memories m, to_tsquery('simple', $2) q
                   WHERE m.workspace = $1 AND m.kind = 'semantic' AND m.status = 'active'
                     AND (m.valid_until IS NULL OR m.valid_until > now()) AND m.search @@ q
                     AND ($5::text[] IS NULL OR m.domain = ANY($5::text[]))
                   ORDER BY (m.repo IS NOT DISTINCT FROM $3) DESC, ts_rank_cd(m.search, q, 1) DESC, m.id
                   LIMIT $4""",
                workspace,
                query.tsquery,
                repo,
                MAX_FACTS,
                readable,
            )
            used = 0
            for r in rows:
                line = f"- [{r['domain'] or 'general'}] {r['content']}"
                if used + len(line) > FACTS_BUDGET_CHARS:
                    break
                facts.append(line)
                used += len(line)
    parts = []
    if policies:
        parts.append("Policies:\n" + "\n".join(policies))
    if notes:
        parts.append("Your notes:\n" + notes)
    if facts:
        parts.append("Relevant facts:\n" + "\n".join(facts))
    parts.append(CLOSING)
    return Preamble("\n\n".join(parts), policies, notes, facts)
