"""The knowledge ports in memory (:class:`noema.ports.KnowledgeReadModel`), answered from
:class:`~.projection.Tables` the way the PostgreSQL adapter answers them from the tables: the same
filters, the same order, the same current-fact rule (:func:`is_current`)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from noema.adapters.memory.projection import Tables
from noema.adapters.memory.records import matching_ids
from noema.adapters.postgres.handlers import Projected

# The rows mirror the tables' columns, so a fact's view is built the one way the tables' rows are.
from noema.adapters.postgres.knowledge import fact_view
from noema.adapters.postgres.textsearch import COMMON_ROWS
from noema.domain.knowledge import FactView
from noema.ports import PreambleParts, Row

__all__ = ["InMemoryKnowledge", "is_current", "terms"]

# The words PostgreSQL's ``english`` configuration drops as stop words that tasks use most.
_STOP = frozenset(
    [
        "a",
        "about",
        "after",
        "all",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "before",
        "been",
        "but",
        "by",
        "can",
        "do",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "please",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "up",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)
_SUFFIXES = ("ing", "ed", "es", "s")


def is_current(m: Row, at: datetime) -> bool:
    """The current-fact rule: active, and not expired at ``at``."""
    return bool(m["status"] == "active" and (m["valid_until"] is None or m["valid_until"] > at))


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def terms(text: str) -> set[str]:
    """The words of ``text`` a full-text match is made on: lower case, stop words dropped, a
    crude stem (a stand-in for PostgreSQL's ``english`` stemmer good enough for tests)."""
    return {_stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP}


def _ids_of(rows: Sequence[Row], given: str) -> list[str]:
    return matching_ids([r["id"] for r in rows], given)


def _gate(domain: str | None, readable: Sequence[str] | None) -> bool:
    return readable is None or domain in readable


class InMemoryKnowledge:
    """The knowledge read model held in memory; fed by :meth:`apply` (see :mod:`noema.adapters.memory`)."""

    def __init__(self, tables: Tables | None = None) -> None:
        self.tables = tables or Tables()

    def as_of(self, seq: int) -> InMemoryKnowledge:
        """The same read model as it stood after stream sequence ``seq`` (read-only)."""
        return InMemoryKnowledge(self.tables.as_of(seq))

    def apply(self, batch: Sequence[Projected]) -> None:
        """Apply stored events in stream order, as the projector does."""
        for item in batch:
            self.tables.apply(item)

    async def project(
        self,
        batch: Sequence[Projected],
        through: int,
        refused: Callable[[Projected, str], Awaitable[None]] | None = None,
    ) -> int:
        """The projector's decision writes here (:class:`noema.application.projector.ReadModelWriter`):
        the events after the position applied, each the read model refuses told to ``refused``
        (before the position moves past it) and skipped, the position moved to ``through``;
        returns how many were applied."""
        applied = 0
        for item in batch:
            if item.seq <= self.tables.position:
                continue
            reason = self.tables.refusal(item.event)
            if reason is not None and refused is not None:
                await refused(item, reason)
            self.tables.apply(item)
            applied += reason is None
        self.tables.position = max(self.tables.position, through)
        return applied

    def _memories(self, workspace: str | None = None) -> list[Row]:
        rows = [m for m in self.tables.memories.values() if workspace is None or m["workspace"] == workspace]
        return sorted(rows, key=lambda m: m["origin_seq"])

    # -- access ---------------------------------------------------------------------------------

    async def access_mode(self, workspace: str) -> str:
        """``compatible`` (default) or ``strict``."""
        return self.tables.access_modes.get(workspace, "compatible")

    async def grants(self, workspace: str, strict: bool) -> dict[tuple[str, str], str]:
        """(role, domain) → access; without the seeded rows in strict mode."""
        return {
            (role, domain): g["access"]
            for (ws, role, domain), g in self.tables.grants.items()
            if ws == workspace and not (g["seeded"] and strict)
        }

    async def grant(self, workspace: str, role: str, domain: str) -> str | None:
        """One grant row's access."""
        g = self.tables.grants.get((workspace, role, domain))
        return None if g is None else str(g["access"])

    async def list_grants(self, workspace: str) -> list[Row]:
        """Every grant row, by domain and role."""
        rows = [dict(g) for (ws, _, _), g in self.tables.grants.items() if ws == workspace]
        return sorted(rows, key=lambda g: (g["domain"], g["role"]))

    async def domain_exists(self, workspace: str, domain: str) -> bool:
        """Whether the domain was created."""
        return (workspace, domain) in self.tables.domains

    async def domain_keys(self, workspace: str) -> list[str]:
        """Every domain key of the workspace."""
        return [d for (ws, d) in self.tables.domains if ws == workspace]

    async def list_domains(self, workspace: str, readable: Sequence[str] | None) -> list[Row]:
        """Domains by key, the readable ones only unless ``readable`` is None."""
        return [
            dict(row)
            for (ws, d), row in sorted(self.tables.domains.items())
            if ws == workspace and _gate(d, readable)
        ]

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
        return [
            fact_view(m)
            for m in self._memories(workspace)
            if m["kind"] == "semantic"
            and (not long_only or m["tier"] == "long")
            and (domain is None or m["domain"] == domain)
            and (topic is None or m["topic"] == topic)
            and is_current(m, at)
        ]

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
        facts = await self.current_facts(workspace, at=at, domain=domain, topic=topic, long_only=True)
        return [f for f in facts if f.id not in exclude and f.seq < before_seq]

    async def facts_with_status(self, ids: Sequence[str]) -> dict[str, tuple[FactView, str]]:
        """id → (fact, status)."""
        found = (self.tables.memories.get(i) for i in ids)
        return {m["id"]: (fact_view(m), m["status"]) for m in found if m is not None}

    async def fact(self, workspace: str, memory_id: str) -> Row | None:
        """A semantic memory's id, domain, topic, status, repo and memory_type."""
        m = self.tables.memories.get(memory_id)
        if m is None or m["workspace"] != workspace or m["kind"] != "semantic":
            return None
        return {k: m[k] for k in ("id", "domain", "topic", "status", "repo", "memory_type")}

    async def fact_ids(self, workspace: str, given: str) -> list[str]:
        """Fact ids ``given`` names (exact first)."""
        rows = [m for m in self._memories(workspace) if m["kind"] == "semantic"]
        return _ids_of(rows, given)

    async def memory_kind(self, workspace: str, given: str) -> tuple[str, str] | None:
        """(id, kind) of the memory ``given`` or its prefix names, the exact id first."""
        found = _ids_of(self._memories(workspace), given)
        return (found[0], self.tables.memories[found[0]]["kind"]) if found else None

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
        """Facts for a listing, the repo's first, then by domain, topic and newest."""
        out = []
        for m in self._memories(workspace):
            if m["kind"] != "semantic" or m["tier"] != "long" or not _gate(m["domain"], readable):
                continue
            if (domain is not None and m["domain"] != domain) or (topic is not None and m["topic"] != topic):
                continue
            if not include_inactive and not is_current(m, at):
                continue
            expired = m["status"] == "active" and m["valid_until"] is not None and m["valid_until"] <= at
            out.append(
                {
                    **{k: m[k] for k in ("id", "domain", "topic", "content", "epistemic_kind", "veracity")},
                    **{k: m[k] for k in ("confidence", "mention_count", "superseded_by", "repo")},
                    **{k: m[k] for k in ("memory_type", "valid_until", "created_at", "updated_at")},
                    "agent": m["mind"],
                    "status": "expired" if expired else m["status"],
                    "_seq": m["origin_seq"],
                }
            )
        out.sort(key=lambda r: -r["_seq"])
        out.sort(key=lambda r: (r["repo"] != repo, r["domain"] or "", r["topic"] or ""))
        return [{k: v for k, v in r.items() if k != "_seq"} for r in out[offset : offset + limit]]

    async def list_conflicts(
        self, workspace: str, domain: str | None, readable: Sequence[str] | None, limit: int, offset: int = 0
    ) -> list[Row]:
        """Recorded conflicts, newest first, with both sides' content."""
        out = []
        rows = sorted(self.tables.conflicts.values(), key=lambda c: -c["origin_seq"])
        for c in rows:
            if c["workspace"] != workspace or (domain is not None and c["domain"] != domain):
                continue
            if not _gate(c["domain"], readable):
                continue
            row = {k: v for k, v in c.items() if k not in ("workspace", "origin_seq")}
            for side in ("winner", "loser"):
                m = self.tables.memories.get(c[f"{side}_id"])
                row[f"{side}_content"] = m["content"] if m else None
                row[f"{side}_agent"] = m["mind"] if m else None
            out.append(row)
        return out[offset : offset + limit]

    async def hot_items(self, workspace: str, mind: str, session: str) -> list[FactView]:
        """A session's active hot-tier items."""
        return [
            fact_view(m)
            for m in self._memories(workspace)
            if m["mind"] == mind
            and m["session"] == session
            and m["tier"] == "hot"
            and m["status"] == "active"
        ]

    async def hot_tier(self, workspace: str, domain: str | None, mind: str | None) -> list[Row]:
        """Active hot-tier items in stream order."""
        keys = ("id", "mind", "content", "domain", "topic", "importance", "mention_count", "created_at")
        return [
            {
                **{k: m[k] for k in keys},
                "source_observation_ids": m["source_observation_ids"],
                "session": m["session"],
            }
            for m in self._memories(workspace)
            if m["tier"] == "hot"
            and m["status"] == "active"
            and (domain is None or m["domain"] == domain)
            and (mind is None or m["mind"] == mind)
        ]

    # -- policies -------------------------------------------------------------------------------

    def _policies(self, workspace: str) -> list[Row]:
        rows = [p for p in self.tables.policies.values() if p["workspace"] == workspace]
        return sorted(rows, key=lambda p: p["origin_seq"])

    async def policy(self, workspace: str, policy_id: str) -> Row | None:
        """A policy's domain, repo, required_role and active flag."""
        p = self.tables.policies.get(policy_id)
        if p is None or p["workspace"] != workspace:
            return None
        return {k: p[k] for k in ("domain", "repo", "required_role", "active")}

    async def policy_ids(self, workspace: str, given: str) -> list[str]:
        """Policy ids ``given`` names (exact first)."""
        return _ids_of(self._policies(workspace), given)

    async def list_policies(
        self, workspace: str, include_inactive: bool, readable: Sequence[str] | None
    ) -> list[Row]:
        """Policies by domain and stream order."""
        keys = ("id", "domain", "repo", "rule", "required_role", "active", "superseded_by", "proposed_by")
        rows = [
            {**{k: p[k] for k in keys}, "created_at": p["created_at"]}
            for p in self._policies(workspace)
            if (include_inactive or p["active"]) and _gate(p["domain"], readable)
        ]
        return sorted(rows, key=lambda p: p["domain"])

    # -- notes and working memory ---------------------------------------------------------------

    async def notes(self, workspace: str, agent: str) -> str | None:
        """An agent's notes."""
        return self.tables.notes.get((workspace, agent))

    async def working_memory(self, workspace: str, mind: str) -> Row | None:
        """A mind's working memory."""
        row = self.tables.working_memory.get((workspace, mind))
        return None if row is None else {**row, "items": [dict(i) for i in row["items"]]}

    async def memory_statuses(self, ids: Sequence[str]) -> dict[str, tuple[str, str, datetime | None]]:
        """id → (content, status, erased_at: never here, erasure being PostgreSQL's alone)."""
        found = (self.tables.memories.get(i) for i in ids)
        return {m["id"]: (m["content"], m["status"], None) for m in found if m is not None}

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
        """Policies, notes and the task's matching current facts, as the PostgreSQL adapter selects
        them (words in more than ``COMMON_ROWS`` of the workspace's memories do not match)."""
        policies = [
            (p["domain"], p["rule"])
            for p in sorted(
                (p for p in self._policies(workspace) if p["active"] and _gate(p["domain"], readable)),
                key=lambda p: (p["repo"] != repo, p["domain"]),
            )
        ]
        facts: list[tuple[str | None, str]] = []
        wanted = terms(task) if task else set()
        memories = self._memories(workspace)
        counts = {t: sum(t in terms(m["content"]) for m in memories) for t in wanted}
        wanted = {t for t in wanted if counts[t] <= COMMON_ROWS}
        if wanted:
            scored = []
            for m in memories:
                if m["kind"] != "semantic" or not is_current(m, at) or not _gate(m["domain"], readable):
                    continue
                shared = len(wanted & terms(m["content"]))
                if shared:
                    scored.append((m["repo"] != repo, -shared, m["id"], m["domain"], m["content"]))
            facts = [(domain, content) for *_, domain, content in sorted(scored)[:max_facts]]
        return PreambleParts(policies, self.tables.notes.get((workspace, agent)), facts)
