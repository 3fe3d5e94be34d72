"""The knowledge ports over PostgreSQL (:class:`noema.ports.KnowledgeReadModel`): every SQL statement
the knowledge, access and preamble services need, with the current-fact rule written once
(:func:`current_fact`) and the application's clock passed in as a parameter."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from noema.adapters.postgres.textsearch import query_of_counts, quoted_lexeme, term_counts
from noema.domain.knowledge import FactView
from noema.ids import id_prefix
from noema.ports import PreambleParts, Row

__all__ = ["FACT_COLUMNS", "SMALL_FACT_SCOPE", "PostgresKnowledge", "current_fact", "fact_view", "facts_sql"]

FACT_COLUMNS = (
    "id, mind, content, veracity, confidence, created_at, origin_seq, domain, topic, mention_count, "
    "source_observation_ids"
)
"""The columns of a memories row that :func:`fact_view` reads."""


SMALL_FACT_SCOPE = 2000
"""A workspace of at most this many memories has its facts matched against the task one by one
(:func:`facts_sql`), never through the facts' full-text index."""


def facts_sql(read_whole: bool) -> str:
    """The preamble's facts statement: the current facts of workspace ``$1`` matching the task's
    query ``$2``, the current repository's (``$3``) first, then those holding more of the task's
    words (``$7``), then by ``ts_rank_cd``; at most ``$4``; ``$5`` the readable domains (NULL: all),
    ``$6`` the time. ``read_whole``: match the workspace's facts one by one instead of through
    the facts' full-text index. The index lists a word's facts in every workspace: for a small
    tenant of a large shared store, a word rare in the tenant and common in the store made the
    planner intersect the index's 80,000 entries with the tenant's 1,000 memories — 24 ms of a
    preamble otherwise under 2 (``bench.recall_latency --workspaces 1000``, docs/benchmarks.md)."""
    match = "(m.search || ''::tsvector) @@ q" if read_whole else "m.search @@ q"
    return f"""SELECT m.domain, m.content FROM memories m, CAST($2 AS tsquery) q
       WHERE m.workspace = $1 AND m.kind = 'semantic' AND {current_fact("$6", "m")}
         AND {match} AND ($5::text[] IS NULL OR m.domain = ANY($5::text[]))
       ORDER BY (m.repo IS NOT DISTINCT FROM $3) DESC,
                (SELECT count(*) FROM unnest($7::text[]) w(lexeme)
                  WHERE m.search @@ CAST(w.lexeme AS tsquery)) DESC,
                ts_rank_cd(m.search, q, 1) DESC, m.id
       LIMIT $4"""


def current_fact(at: str, alias: str = "") -> str:
    """The one place the "current fact" rule is written: active, and not expired at the instant the
    SQL parameter ``at`` (e.g. ``$4``) holds — the application clock's now, never the database's."""
    m = f"{alias}." if alias else ""
    return f"{m}status = 'active' AND ({m}valid_until IS NULL OR {m}valid_until > {at})"


def fact_view(r: asyncpg.Record | Row) -> FactView:
    """A fact's row (selected with :data:`FACT_COLUMNS`) as the view the conflict rules decide on."""
    return FactView(
        id=r["id"],
        content=r["content"],
        veracity=r["veracity"],
        confidence=r["confidence"],
        created_at=r["created_at"],
        seq=r["origin_seq"],
        agent=r["mind"],
        domain=r["domain"] or "",
        topic=r["topic"] or "",
        mention_count=r["mention_count"],
        sources=tuple(r["source_observation_ids"]),
    )


def _rows(records: Sequence[asyncpg.Record]) -> list[Row]:
    return [dict(r) for r in records]


class PostgresKnowledge:
    """Facts, policies, domains, grants, notes, the hot tier and the preamble's reads, through a pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    # -- access ---------------------------------------------------------------------------------

    async def access_mode(self, workspace: str) -> str:
        """``compatible`` (default) or ``strict``."""
        mode = await self.pool.fetchval(
            "SELECT access_mode FROM workspace_settings WHERE workspace = $1", workspace
        )
        return str(mode or "compatible")

    async def grants(self, workspace: str, strict: bool) -> dict[tuple[str, str], str]:
        """(role, domain) → access; in strict mode without the seeds of compatible mode."""
        rows = await self.pool.fetch(
            "SELECT role, domain, access FROM grants WHERE workspace = $1 AND NOT (seeded AND $2::boolean)",
            workspace,
            strict,
        )
        return {(r["role"], r["domain"]): r["access"] for r in rows}

    async def grant(self, workspace: str, role: str, domain: str) -> str | None:
        """One grant row's access."""
        value = await self.pool.fetchval(
            "SELECT access FROM grants WHERE workspace = $1 AND role = $2 AND domain = $3",
            workspace,
            role,
            domain,
        )
        return None if value is None else str(value)

    async def list_grants(self, workspace: str) -> list[Row]:
        """Every grant row of a workspace."""
        return _rows(
            await self.pool.fetch(
                "SELECT role, domain, access, seeded, changed_by, updated_at FROM grants "
                "WHERE workspace = $1 ORDER BY domain, role",
                workspace,
            )
        )

    async def domain_exists(self, workspace: str, domain: str) -> bool:
        """Whether the domain was created."""
        return bool(
            await self.pool.fetchval(
                "SELECT 1 FROM domains WHERE workspace = $1 AND domain = $2", workspace, domain
            )
        )

    async def domain_keys(self, workspace: str) -> list[str]:
        """Every domain key of the workspace."""
        rows = await self.pool.fetch("SELECT domain FROM domains WHERE workspace = $1", workspace)
        return [r["domain"] for r in rows]

    async def list_domains(self, workspace: str, readable: Sequence[str] | None) -> list[Row]:
        """Domains, the readable ones only unless ``readable`` is None."""
        return _rows(
            await self.pool.fetch(
                "SELECT domain, name, repo, created_by, created_at FROM domains WHERE workspace = $1 "
                "AND ($2::text[] IS NULL OR domain = ANY($2::text[])) ORDER BY domain",
                workspace,
                None if readable is None else list(readable),
            )
        )

    # -- facts ----------------------------------------------------------------------------------

    async def current_facts(
        self,
        workspace: str,
        *,
        at: datetime,
        domain: str | None = None,
        topic: str | None = None,
        long_only: bool = False,
    ) -> list[FactView]:
        """Current facts at ``at``, in stream order."""
        rows = await self.pool.fetch(
            f"SELECT {FACT_COLUMNS} FROM memories WHERE workspace = $1 AND kind = 'semantic' "
            f"AND ($5 OR tier = 'long') AND ($2::text IS NULL OR domain = $2) "
            f"AND ($3::text IS NULL OR topic = $3) AND {current_fact('$4')} ORDER BY origin_seq",
            workspace,
            domain,
            topic,
            at,
            not long_only,
        )
        return [fact_view(r) for r in rows]

    async def slot_rivals(
        self,
        workspace: str,
        domain: str,
        topic: str,
        *,
        before_seq: int,
        exclude: Sequence[str],
        at: datetime,
    ) -> list[FactView]:
        """The slot's long-term facts current at ``at``, older than ``before_seq``, except ``exclude``."""
        rows = await self.pool.fetch(
            f"SELECT {FACT_COLUMNS} FROM memories WHERE workspace = $1 AND kind = 'semantic' "
            "AND tier = 'long' AND domain = $2 AND topic = $3 "
            f"AND id <> ALL($4::text[]) AND origin_seq < $5 AND {current_fact('$6')} ORDER BY origin_seq",
            workspace,
            domain,
            topic,
            list(exclude),
            before_seq,
            at,
        )
        return [fact_view(r) for r in rows]

    async def facts_with_status(self, ids: Sequence[str]) -> dict[str, tuple[FactView, str]]:
        """id → (fact, status)."""
        rows = await self.pool.fetch(
            f"SELECT {FACT_COLUMNS}, status FROM memories WHERE id = ANY($1::text[])", list(ids)
        )
        return {r["id"]: (fact_view(r), r["status"]) for r in rows}

    async def fact(self, workspace: str, memory_id: str) -> Row | None:
        """A semantic memory's id, domain, topic, status, repo and memory_type."""
        row = await self.pool.fetchrow(
            "SELECT id, domain, topic, status, repo, memory_type FROM memories "
            "WHERE id = $1 AND workspace = $2 AND kind = 'semantic'",
            memory_id,
            workspace,
        )
        return None if row is None else dict(row)

    async def _ids(self, table: str, workspace: str, given: str, where: str = "") -> list[str]:
        # ``table`` and ``where`` come from this module only.
        if await self.pool.fetchval(
            f"SELECT 1 FROM {table} WHERE id = $1 AND workspace = $2{where}", given, workspace
        ):
            return [given]
        pattern = id_prefix(given)
        if pattern is None:
            return []
        rows = await self.pool.fetch(
            f"SELECT id FROM {table} WHERE id LIKE $1 AND workspace = $2{where} ORDER BY id LIMIT 2",
            pattern,
            workspace,
        )
        return [r["id"] for r in rows]

    async def fact_ids(self, workspace: str, given: str) -> list[str]:
        """Fact ids ``given`` names (exact first)."""
        return await self._ids("memories", workspace, given, " AND kind = 'semantic'")

    async def memory_kind(self, workspace: str, given: str) -> tuple[str, str] | None:
        """(id, kind) of the memory ``given`` or its prefix names, the exact id first."""
        row = await self.pool.fetchrow(
            "SELECT id, kind FROM memories WHERE workspace = $1 AND (id = $2 OR id LIKE $3) "
            "ORDER BY id = $2 DESC LIMIT 1",
            workspace,
            given,
            id_prefix(given),
        )
        return None if row is None else (row["id"], row["kind"])

    async def list_facts(
        self,
        workspace: str,
        *,
        at: datetime,
        domain: str | None,
        topic: str | None,
        include_inactive: bool,
        readable: Sequence[str] | None,
        repo: str | None,
        limit: int,
        offset: int = 0,
    ) -> list[Row]:
        """Facts for a listing, the repo's first."""
        rows = await self.pool.fetch(
            f"""SELECT id, mind AS agent, domain, topic, content, epistemic_kind, veracity, confidence,
                      mention_count,
                      CASE WHEN status = 'active' AND valid_until <= $8 THEN 'expired' ELSE status END
                          AS status,
                      superseded_by, repo, memory_type, valid_until, created_at, updated_at
               FROM memories WHERE workspace = $1 AND kind = 'semantic' AND tier = 'long'
                 AND ($2::text IS NULL OR domain = $2) AND ($3::text IS NULL OR topic = $3)
                 AND ($4 OR ({current_fact("$8")}))
                 AND ($5::text[] IS NULL OR domain = ANY($5::text[]))
               ORDER BY (repo IS NOT DISTINCT FROM $6) DESC, domain, topic, origin_seq DESC
               LIMIT $7 OFFSET $9""",
            workspace,
            domain,
            topic,
            include_inactive,
            None if readable is None else list(readable),
            repo,
            limit,
            at,
            offset,
        )
        return _rows(rows)

    async def list_conflicts(
        self, workspace: str, domain: str | None, readable: Sequence[str] | None, limit: int, offset: int = 0
    ) -> list[Row]:
        """Recorded conflicts, newest first, with both sides' content."""
        rows = await self.pool.fetch(
            """SELECT c.id, c.domain, c.topic, c.rule, c.detail, c.decided_by, c.created_at,
                      c.winner_id, w.content AS winner_content, w.mind AS winner_agent,
                      c.loser_id, l.content AS loser_content, l.mind AS loser_agent
               FROM conflicts c LEFT JOIN memories w ON w.id = c.winner_id
                    LEFT JOIN memories l ON l.id = c.loser_id
               WHERE c.workspace = $1 AND ($2::text IS NULL OR c.domain = $2)
                 AND ($3::text[] IS NULL OR c.domain = ANY($3::text[]))
               ORDER BY c.origin_seq DESC LIMIT $4 OFFSET $5""",
            workspace,
            domain,
            None if readable is None else list(readable),
            limit,
            offset,
        )
        return _rows(rows)

    async def hot_items(self, workspace: str, mind: str, session: str) -> list[FactView]:
        """A session's active hot-tier items."""
        rows = await self.pool.fetch(
            f"SELECT {FACT_COLUMNS} FROM memories WHERE workspace = $1 AND mind = $2 AND session = $3 "
            "AND tier = 'hot' AND status = 'active'",
            workspace,
            mind,
            session,
        )
        return [fact_view(r) for r in rows]

    async def hot_tier(self, workspace: str, domain: str | None, mind: str | None) -> list[Row]:
        """Active hot-tier items in stream order."""
        rows = await self.pool.fetch(
            """SELECT id, mind, content, domain, topic, importance, mention_count, created_at,
                      source_observation_ids, session
               FROM memories WHERE workspace = $1 AND tier = 'hot' AND status = 'active'
                 AND ($2::text IS NULL OR domain = $2) AND ($3::text IS NULL OR mind = $3)
               ORDER BY origin_seq""",
            workspace,
            domain,
            mind,
        )
        return _rows(rows)

    # -- policies -------------------------------------------------------------------------------

    async def policy(self, workspace: str, policy_id: str) -> Row | None:
        """A policy's domain, repo, required_role and active flag."""
        row = await self.pool.fetchrow(
            "SELECT domain, repo, required_role, active FROM policies WHERE id = $1 AND workspace = $2",
            policy_id,
            workspace,
        )
        return None if row is None else dict(row)

    async def policy_ids(self, workspace: str, given: str) -> list[str]:
        """Policy ids ``given`` names (exact first)."""
        return await self._ids("policies", workspace, given)

    async def list_policies(
        self, workspace: str, include_inactive: bool, readable: Sequence[str] | None
    ) -> list[Row]:
        """Policies by domain and stream order."""
        rows = await self.pool.fetch(
            """SELECT id, domain, repo, rule, required_role, active, superseded_by, proposed_by, created_at
               FROM policies WHERE workspace = $1 AND ($2 OR active)
                 AND ($3::text[] IS NULL OR domain = ANY($3::text[]))
               ORDER BY domain, origin_seq""",
            workspace,
            include_inactive,
            None if readable is None else list(readable),
        )
        return _rows(rows)

    # -- notes and working memory ---------------------------------------------------------------

    async def notes(self, workspace: str, agent: str) -> str | None:
        """An agent's notes."""
        value = await self.pool.fetchval(
            "SELECT notes FROM agent_notes WHERE workspace = $1 AND agent = $2", workspace, agent
        )
        return None if value is None else str(value)

    async def working_memory(self, workspace: str, mind: str) -> Row | None:
        """A mind's working memory, its items decoded."""
        row = await self.pool.fetchrow(
            "SELECT capacity, items, updated_at FROM working_memory WHERE workspace = $1 AND mind = $2",
            workspace,
            mind,
        )
        if row is None:
            return None
        return {
            "capacity": row["capacity"],
            "items": json.loads(row["items"]),
            "updated_at": row["updated_at"],
        }

    async def memory_statuses(self, ids: Sequence[str]) -> dict[str, tuple[str, str, datetime | None]]:
        """id → (content, status, erased_at)."""
        rows = await self.pool.fetch(
            "SELECT id, content, status, erased_at FROM memories WHERE id = ANY($1::text[])", list(ids)
        )
        return {r["id"]: (r["content"], r["status"], r["erased_at"]) for r in rows}

    # -- the preamble ---------------------------------------------------------------------------

    async def preamble_parts(
        self,
        workspace: str,
        agent: str,
        task: str | None,
        *,
        repo: str | None,
        readable: Sequence[str] | None,
        at: datetime,
        max_facts: int,
    ) -> PreambleParts:
        """Two round trips on one connection: the policies, the notes and the task's text statistics
        in one statement, then the facts. Which of the task's words are too common to match on is
        decided within the workspace (:mod:`.textsearch`); a task of common words only adds no
        facts."""
        gate: list[str] | None = None if readable is None else list(readable)
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(
                f"""SELECT
                      (SELECT coalesce(json_agg(json_build_array(p.domain, p.rule)
                                                ORDER BY (p.repo IS NOT DISTINCT FROM $3) DESC,
                                                         p.domain, p.origin_seq), '[]')::text
                         FROM policies p
                        WHERE p.workspace = $1 AND p.active
                          AND ($2::text[] IS NULL OR p.domain = ANY($2::text[]))) AS policies,
                      (SELECT notes FROM agent_notes WHERE workspace = $1 AND agent = $4) AS notes,
                      CASE WHEN $5::text IS NULL THEN NULL ELSE {term_counts("$5", "$1")} END AS terms,
                      CASE WHEN $5::text IS NULL THEN NULL
                           ELSE (SELECT count(*) FROM (SELECT 1 FROM memories WHERE workspace = $1
                                                       LIMIT {SMALL_FACT_SCOPE + 1}) s) END AS scope""",
                workspace,
                gate,
                repo,
                agent,
                task,
            )
            policies = [(domain, rule) for domain, rule in json.loads(row["policies"])]
            notes = row["notes"]
            facts: list[tuple[str | None, str]] = []
            query = query_of_counts(row["terms"])
            if query is not None and not query.broad:
                # The query's lexemes as they are (cast, not parsed again: to_tsquery would split
                # "on-call" into a phrase of its parts, which the stemmed content never holds).
                # A fact holding more of the task's words ranks first (issue 32: "when do we deploy
                # capybara" put facts repeating "deploy" before "The capybara deploy window is …",
                # as ts_rank_cd counts occurrences, not words), then by ts_rank_cd.
                rows: list[Any] = await conn.fetch(
                    facts_sql(read_whole=row["scope"] <= SMALL_FACT_SCOPE),
                    workspace,
                    query.tsquery,
                    repo,
                    max_facts,
                    gate,
                    at,
                    [quoted_lexeme(lexeme) for lexeme in query.lexemes],
                )
                facts = [(r["domain"], r["content"]) for r in rows]
        return PreambleParts(policies, None if notes is None else str(notes), facts)
