"""The recall voices as SQL: lexical (full text), semantic (pgvector KNN), temporal, graph walk.

Each voice returns ranked (memory id, score) pairs inside the caller's filters; scoring and fusion
are pure (:mod:`noema.domain.ranking`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from noema.adapters.postgres.textsearch import BROAD_CANDIDATES, TermStats, TextQuery, selective_query
from noema.domain.ranking import Candidate
from noema.errors import InvalidQuery
from noema.ports import RESULT_FIELDS, RecallFilters

__all__ = ["RecallStore", "activation_sql", "filter_conditions"]

_MODEL = re.compile(r"^[\w./:-]{1,200}$")

EF_SEARCH = 200
"""The HNSW scan's candidate list (``hnsw.ef_search``)."""


def _inlined(model: str) -> None:
    """Refuse a model name that could not be inlined in SQL safely (callers check it first)."""
    if not _MODEL.fullmatch(model):
        raise ValueError(f"invalid model name {model!r}")


MAX_SCAN_TUPLES = 2000
"""How far an HNSW scan may go when filters drop neighbours (``hnsw.max_scan_tuples``)."""

EXACT_SCOPE_MAX = 2000
"""The most memories the semantic voice compares one by one (see :func:`searched_exactly`)."""


def searched_exactly(scope_memories: float) -> bool:
    """Whether the semantic voice compares the scope's vectors one by one instead of walking the
    HNSW index: when the scope (the workspace, or the whole store for an operator's search) has at
    most ``EXACT_SCOPE_MAX`` memories. Below that, comparing them all costs no more than the
    index's scan of a large store (``bench.recall_latency``'s ``exact_scan``: docs/benchmarks.md),
    and the answer is exact — the index's is approximate, and its bounded scan
    (``MAX_SCAN_TUPLES``) may meet only a few of a small workspace's memories in a large shared
    store. Beyond it the index's cost does not grow with the scope; the exact scan's does."""
    return scope_memories <= EXACT_SCOPE_MAX


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form of ``vector`` (each value's shortest exact decimal, as ``repr``)."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def activation_sql(at: str, alias: str = "") -> str:
    """The SQL expression of a memory's activation at ``at`` (an SQL parameter or expression), in
    closed form from its stored activation (``noema_activation``, migration 0012); ``alias``: the
    memories table's alias, if any."""
    m = f"{alias}." if alias else ""
    return (
        f"noema_activation({m}activation, {m}activation_at, {m}importance, {m}half_life_days, "
        f"{m}activation_floor, {at})"
    )


def filter_conditions(f: RecallFilters, alias: str, args: list[Any]) -> str:
    """SQL conditions of ``f`` on ``alias`` (memories), appending their parameters to ``args``."""

    def p(value: Any) -> str:
        args.append(value)
        return f"${len(args)}"

    m = alias
    conds = ["true"] if f.workspace is None else [f"{m}.workspace = {p(f.workspace)}"]
    if f.mind is not None:
        conds.append(f"{m}.mind = {p(f.mind)}")
    if f.kinds:
        conds.append(f"{m}.kind = ANY({p(list(f.kinds))}::text[])")
    if f.epistemic_kinds:
        conds.append(f"{m}.epistemic_kind = ANY({p(list(f.epistemic_kinds))}::text[])")
    if f.domains:
        conds.append(f"{m}.domain = ANY({p(list(f.domains))}::text[])")
    if f.hidden_domains:
        conds.append(f"({m}.domain IS NULL OR NOT {m}.domain = ANY({p(list(f.hidden_domains))}::text[]))")
    if f.readable_domains is not None:
        conds.append(f"({m}.domain IS NULL OR {m}.domain = ANY({p(list(f.readable_domains))}::text[]))")
    if f.exclude_ids:
        conds.append(f"NOT {m}.id = ANY({p(list(f.exclude_ids))}::text[])")
    if f.statuses:
        conds.append(f"{m}.status = ANY({p(list(f.statuses))}::text[])")
    if f.since is not None:
        conds.append(f"coalesce({m}.happened_at, {m}.created_at) >= {p(f.since)}")
    if f.until is not None:
        conds.append(f"coalesce({m}.happened_at, {m}.created_at) < {p(f.until)}")
    if not f.include_expired:
        now = "now()" if f.now is None else p(f.now)
        conds.append(f"({m}.valid_until IS NULL OR {m}.valid_until > {now})")
    return " AND ".join(conds)


def _turns(start: str, step: str, near: str) -> str:
    """SQL: the ids of the (up to) two turns chained by ``episodic_next`` on one side of memory
    ``start`` — before it (``step`` = from_id, ``near`` = to_id) or after it (the reverse)."""
    return f"""SELECT t1.{step} FROM relationships t1
               WHERE t1.{near} = {start} AND t1.relation = 'episodic_next'
               UNION ALL
               SELECT t2.{step} FROM relationships t1
               JOIN relationships t2 ON t2.{near} = t1.{step} AND t2.relation = 'episodic_next'
               WHERE t1.{near} = {start} AND t1.relation = 'episodic_next'"""


REPLY_WEIGHT = f"""(SELECT 1.0 / greatest(1, count(DISTINCT p) - 1)
    FROM memories t, unnest(t.participants) p
    WHERE t.id IN (SELECT r.from_id UNION ALL SELECT r.to_id
                   UNION ALL {_turns("r.from_id", "from_id", "to_id")}
                   UNION ALL {_turns("r.to_id", "to_id", "from_id")}))"""
"""SQL: how likely the next turn of a session (``episodic_next`` edge ``r``) answers the turn
before it, from the conversation's structure alone — 1 / (k − 1) for the k people taking part in
the turns around the edge (its two turns and the two before and after them; 1 when fewer than
three take part). Between two people the next turn is the reply; in a busy channel, where several
people and agents post interleaved threads, it is more often about something else. An agent's
own session (one participant) keeps its chain whole."""


_DETAILS = frozenset(RESULT_FIELDS)


def _detail_columns(at: str, alias: str = "") -> str:
    """:data:`~noema.ports.RESULT_FIELDS` as a select list of ``memories`` (``alias``: its alias,
    if any), the activation as of ``at``."""
    m = f"{alias}." if alias else ""
    activation = f"{activation_sql(at, alias)} AS activation"
    return ", ".join(activation if c == "activation" else f"{m}{c}" for c in RESULT_FIELDS)


class RecallStore:
    """Runs the voices against one schema's read model."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        has_vectors: bool,
        term_stats: TermStats | None = None,
        *,
        exact: bool = False,
        live: str | None = None,
    ) -> None:
        self._pool = pool
        self.has_vectors = has_vectors
        self.term_stats = term_stats or TermStats()
        self.exact = exact
        """Compare every vector of the scope, never through the HNSW index (whose answers are
        approximate)."""
        self.live = live
        """For the reads as of a point (``pool`` lends connections reading the as-of views): the live
        schema behind them, whose vector indexes the semantic voice walks (:meth:`past_semantic_sql`)."""

    @staticmethod
    async def create_pool(
        url: str, schema: str, app: str = "noema-recall", search_path: str | None = None, **kwargs: Any
    ) -> asyncpg.Pool:
        """A pool for recall: pgvector values as numpy arrays, HNSW scans that survive filtering;
        ``search_path``: another one than ``schema``'s (the as-of views', for one)."""
        from pgvector.asyncpg import register_vector

        from noema.adapters.postgres.database import create_pool

        async def init(conn: asyncpg.Connection) -> None:
            if await conn.fetchval("SELECT 1 FROM pg_type WHERE typname = 'vector'"):
                await register_vector(conn)

        # Connection-start settings, not SETs in init: the pool's RESET ALL on every release would
        # undo a SET after a connection's first use; it restores these.
        hnsw = {
            "hnsw.iterative_scan": "relaxed_order",
            "hnsw.ef_search": str(EF_SEARCH),
            # Bound how far an iterative scan may go when filters drop neighbours (tail latency).
            "hnsw.max_scan_tuples": str(MAX_SCAN_TUPLES),
            # Plan every statement for its own values. asyncpg prepares each statement once per
            # connection, and after five runs PostgreSQL may switch a prepared statement to a
            # generic plan, blind to how common the query's words are or how large its workspace
            # is: at 100,000 memories the text voice's query for a common word went from 35 to
            # 216 ms that way. Planning a recall's statements costs well under a millisecond.
            "plan_cache_mode": "force_custom_plan",
        }
        if search_path is not None:
            hnsw["search_path"] = search_path
        return await create_pool(url, schema, app=app, settings=hnsw, init=init, **kwargs)

    @classmethod
    async def open(cls, pool: asyncpg.Pool, *, exact: bool = False) -> RecallStore:
        """Detect whether vectors are stored as pgvector (else the semantic voice is off) and which
        schema the pool reads (its text statistics are cached under that name); ``exact``: see
        :attr:`exact`."""
        row = await pool.fetchrow(
            "SELECT format_type(atttypid, atttypmod) AS kind, current_schema() AS schema FROM pg_attribute "
            "WHERE attrelid = 'memory_embeddings'::regclass AND attname = 'embedding'"
        )
        assert row is not None, "the read model has no memory_embeddings.embedding column"
        return cls(pool, row["kind"] == "vector", TermStats(schema=row["schema"]), exact=exact)

    async def lexical(
        self,
        query: str,
        f: RecallFilters,
        limit: int,
        strict: bool = False,
        broad: bool = True,
        max_terms: int | None = None,
    ) -> list[tuple[str, float]]:
        """Full text: any selective word by default; web-search syntax (quotes, OR, -) when strict.

        ``broad=False`` returns nothing for a query made only of very common words: beside other
        voices, such a query has no text signal worth ranking most of the store for. ``max_terms``:
        match on at most that many words, the rarest (see :func:`selective_query`). A query the
        database cannot read is an :class:`~noema.errors.InvalidQuery`.
        """
        try:
            return await self._lexical(query, f, limit, strict, broad, max_terms)
        except asyncpg.PostgresSyntaxError as exc:
            raise InvalidQuery(f"query not understood: {exc}") from None

    async def _lexical(
        self, query: str, f: RecallFilters, limit: int, strict: bool, broad: bool, max_terms: int | None
    ) -> list[tuple[str, float]]:
        async with self._pool.acquire() as conn:
            args: list[Any] = []
            if strict:
                args.append(query)
                where = filter_conditions(f, "m", args)
                args.append(limit)
                rows = await conn.fetch(
                    f"""SELECT m.id, ts_rank_cd(m.search, q, 1) AS score
                        FROM memories m, websearch_to_tsquery('english', $1) q
                        WHERE m.search @@ q AND {where}
                        ORDER BY score DESC, m.id LIMIT ${len(args)}""",
                    *args,
                )
            else:
                text_query = await selective_query(conn, query, f.workspace, max_terms)
                if text_query is None or (text_query.broad and not broad):
                    return []
                n, avgdl = await self.term_stats.scope(conn, f.workspace)
                rows = await conn.fetch(self.bm25_sql(text_query, f, args, n, avgdl, limit), *args)
        return [(r["id"], float(r["score"])) for r in rows]

    @staticmethod
    def bm25_sql(
        text_query: TextQuery, f: RecallFilters, args: list[Any], n: float, avgdl: float, limit: int
    ) -> str:
        """The text voice's BM25 statement (k1 1.2, b 0.75) for a selective query; ``args`` gets its
        values. A word's weight is its rarity in the scope (its memories counted among the matches,
        which hold every memory of the scope with the word); a participant's name counts 0.4 of a
        content word. ``n`` (the scope's size, cached while the store grows) never counts fewer
        memories than match, or a word's weight would turn negative.

        Each word's memories come from ``memory_postings`` (migration 0009) by primary key: the cost
        is the query's words' postings, not every matching memory's whole text. A query of common
        words only (``broad``) ranks the newest ``BROAD_CANDIDATES`` memories that hold its word
        (walking the recency index, which finds them fast precisely because they are common). The
        arithmetic is float8: with integer counts and decimal literals PostgreSQL computes in
        numeric, whose ln() was half of the statement's time. A memory's words are summed in one
        order (float addition is not associative): otherwise equal scores could differ in their
        last bit with the order rows are read in, and ties rank differently in a read model of the
        same rows laid out otherwise (a rebuilt projection version, a replay)."""
        args.append(list(text_query.lexemes))
        lexemes = f"${len(args)}::text[]"
        where = filter_conditions(f, "m", args)
        if text_query.broad:
            # The candidates' postings by primary key, one each (OFFSET 0): joined otherwise, the
            # planner reads all of the common word's postings (86,000 at 100,000 memories).
            # The lexeme is cast, not parsed again: to_tsquery would split "on-call" into a phrase
            # of its parts, which the stemmed content never holds.
            args.append(text_query.tsquery)
            terms = f"""SELECT p.memory_id AS id, p.lexeme, p.tf, p.dl
                FROM (SELECT m.id, m.workspace FROM memories m
                      WHERE m.search @@ ${len(args)}::tsquery AND {where}
                      ORDER BY coalesce(m.happened_at, m.created_at) DESC LIMIT {BROAD_CANDIDATES}) h
                CROSS JOIN LATERAL (SELECT * FROM memory_postings p WHERE p.lexeme = ANY({lexemes})
                                      AND p.workspace = h.workspace AND p.memory_id = h.id OFFSET 0) p"""
        else:
            # Each posting's memory is read by its primary key (OFFSET 0 keeps the filters out of
            # the lateral read): otherwise, in a large store, the planner hashes the whole scope to
            # join a few hundred postings.
            scope = "m.workspace"
            if f.workspace is not None:
                args.append(f.workspace)
                scope = f"${len(args)}"
            terms = f"""SELECT p.memory_id AS id, p.lexeme, p.tf, p.dl
                FROM memory_postings p
                CROSS JOIN LATERAL (SELECT * FROM memories WHERE id = p.memory_id OFFSET 0) m
                WHERE p.lexeme = ANY({lexemes}) AND p.workspace = {scope} AND {where}"""
        args += [n, avgdl, limit]
        k = len(args)
        return f"""WITH terms AS ({terms}),
            df AS (SELECT lexeme, count(*)::float8 AS n FROM terms GROUP BY lexeme)
            SELECT t.id, sum(ln(1 + (greatest(${k - 2}::float8, df.n) - df.n + 0.5) / (df.n + 0.5))
                             * t.tf * 2.2
                             / (t.tf + 1.2 * (0.25 + 0.75 * t.dl::float8 / ${k - 1}::float8))
                             ORDER BY t.lexeme) AS score
            FROM terms t JOIN df USING (lexeme)
            GROUP BY t.id ORDER BY score DESC, t.id LIMIT ${k}"""

    async def semantic(
        self, vector: Sequence[float], model: str, f: RecallFilters, limit: int
    ) -> list[tuple[str, float]]:
        """Nearest neighbours by cosine under one model: exactly for a small scope, through the
        model's HNSW index beyond (:func:`searched_exactly`)."""
        if not self.has_vectors or not _MODEL.fullmatch(model):
            return []
        # Sent as pgvector's text form, so any pool works (with or without the binary codec).
        args: list[Any] = [vector_literal(vector)]
        async with self._pool.acquire() as conn:
            scope = (await self.term_stats.scope(conn, f.workspace))[0]
            exact = self.exact or searched_exactly(scope)
            if exact:
                sql = self.exact_semantic_sql(len(vector), model, f, args, limit)
            elif self.live is None:
                sql = self.semantic_sql(len(vector), model, f, args, limit)
            else:
                sql = self.past_semantic_sql(self.live, len(vector), model, f, args, limit)
            rows = await conn.fetch(sql, *args)
            if self.live is not None and not exact and len(rows) < min(limit, scope):
                # As of an early point of a large store, few of the index's vectors held then, and
                # its bounded scan (MAX_SCAN_TUPLES) may meet too few of them: compare them all.
                args = args[:1]
                rows = await conn.fetch(self.exact_semantic_sql(len(vector), model, f, args, limit), *args)
        return [(r["id"], float(r["score"])) for r in rows]

    @staticmethod
    def semantic_sql(dims: int, model: str, f: RecallFilters, args: list[Any], limit: int) -> str:
        """The semantic voice's statement through the HNSW index; ``args`` holds the query vector's
        text form first and gets the filters' and the limit's values appended."""
        _inlined(model)
        where = filter_conditions(f, "m", args)
        args.append(limit)
        # The model is inlined (validated by the caller) so the planner can use the model's partial
        # index. Each neighbour's memory is read by its primary key (OFFSET 0 keeps the filters out
        # of the lateral read): with statistics missing or stale — a young or fast-growing
        # workspace, before autovacuum has analysed it — the planner otherwise read the whole
        # scope through a (workspace, …) index once per neighbour (10 ms instead of 1 at 200
        # memories, growing with the scope).
        return f"""WITH q AS (SELECT $1::text::vector({dims}) AS v)
            SELECT e.memory_id AS id, 1 - (e.embedding::vector({dims}) <=> q.v) AS score
            FROM q, memory_embeddings e
            CROSS JOIN LATERAL (SELECT * FROM memories WHERE id = e.memory_id OFFSET 0) m
            WHERE e.model = '{model}' AND {where}
            ORDER BY e.embedding::vector({dims}) <=> q.v LIMIT ${len(args)}"""

    @staticmethod
    def past_semantic_sql(
        live: str, dims: int, model: str, f: RecallFilters, args: list[Any], limit: int
    ) -> str:
        """:meth:`semantic_sql` as of a point (on a connection reading the as-of views, migrations
        0016 and 0017), through the live schema ``live``'s HNSW index: a vector's open version is
        its live row, so the vectors held at the point are the live rows written by then — the
        index's walk, filtered on ``row_seq`` — and the closed versions valid then (none while
        vectors are never replaced; read by a partial index of the closed ones). The walk is the
        present's (as approximate: the answer at the last sequence is the present's); a scope small
        enough is compared exactly instead (:func:`searched_exactly`, as the present does)."""
        _inlined(model)
        where = filter_conditions(f, "m", args)
        args.append(limit)
        k = f"${len(args)}"
        distance = f"e.embedding::vector({dims}) <=> q.v"
        # q is inlined in both branches (NOT MATERIALIZED): read from a materialised CTE, the query
        # vector is no constant and the planner cannot walk the index by it.
        return f"""WITH q AS NOT MATERIALIZED (SELECT $1::text::vector({dims}) AS v)
            SELECT id, 1 - d AS score FROM (
                (SELECT e.memory_id AS id, {distance} AS d
                 FROM q, {live}.memory_embeddings e
                 CROSS JOIN LATERAL (SELECT * FROM memories WHERE id = e.memory_id OFFSET 0) m
                 WHERE e.model = '{model}' AND e.row_seq <= {live}.noema_as_of() AND {where}
                 ORDER BY {distance} LIMIT {k})
                UNION ALL
                (SELECT e.memory_id, {distance}
                 FROM q, {live}.memory_embeddings_history e
                 CROSS JOIN LATERAL (SELECT * FROM memories WHERE id = e.memory_id OFFSET 0) m
                 WHERE e.model = '{model}' AND e.valid_to_seq IS NOT NULL
                   AND e.valid_from_seq <= {live}.noema_as_of() AND e.valid_to_seq > {live}.noema_as_of()
                   AND {where})
            ) x ORDER BY d LIMIT {k}"""

    @staticmethod
    def exact_semantic_sql(dims: int, model: str, f: RecallFilters, args: list[Any], limit: int) -> str:
        """The semantic voice's statement comparing every memory of the scope: the scope's memories
        first, each one's vector by its primary key (OFFSET 0: never through the model's HNSW
        index, which cannot answer a lookup by memory)."""
        _inlined(model)
        where = filter_conditions(f, "m", args)
        args.append(limit)
        return f"""WITH q AS (SELECT $1::text::vector({dims}) AS v)
            SELECT m.id, 1 - (e.embedding::vector({dims}) <=> q.v) AS score
            FROM q, memories m
            CROSS JOIN LATERAL (SELECT embedding FROM memory_embeddings
                                WHERE memory_id = m.id AND model = '{model}' OFFSET 0) e
            WHERE {where}
            ORDER BY e.embedding::vector({dims}) <=> q.v LIMIT ${len(args)}"""

    async def recent(self, f: RecallFilters, limit: int) -> list[tuple[str, float]]:
        """The most recent memories (by when they happened, else when they were recorded)."""
        args: list[Any] = []
        where = filter_conditions(f, "m", args)
        args.append(limit)
        rows = await self._pool.fetch(
            f"""SELECT m.id, extract(epoch FROM coalesce(m.happened_at, m.created_at))::float8 AS score
                FROM memories m WHERE {where}
                ORDER BY coalesce(m.happened_at, m.created_at) DESC, m.id LIMIT ${len(args)}""",
            *args,
        )
        return [(r["id"], float(r["score"])) for r in rows]

    async def graph(
        self, seeds: Mapping[str, float], f: RecallFilters, limit: int, model: str | None, now: datetime
    ) -> tuple[list[tuple[str, float]], dict[str, Candidate]]:
        """Two-hop walk over relationship edges from the seeds (id → strength), in either direction:
        the memories reached, best first, and each one's :meth:`candidates` row (read in the same
        statement, one round trip fewer for a hybrid search).

        Weight: seed strength × edge weight on the first hop, half that × the next edge's weight
        on the second; the best path counts; seeds themselves are excluded. An edge's weight is
        its confidence, and for an ``episodic_next`` edge (the next turn of a session) also how
        likely that turn answers the one before (:data:`REPLY_WEIGHT`). The edges of both hops
        are weighed once each, by one copy of that expression: recall plans every statement for its
        values, and with a copy per direction and hop the walk's planning took 7.9 ms against 3.5,
        with a copy per hop 1.35 ms against 0.96 at 100,000 memories (docs/benchmarks.md); an edge
        met by both hops (a seed's edge seen again from its other end) is weighed once.
        """
        if not seeds:
            return [], {}
        args: list[Any] = [list(seeds), [float(w) for w in seeds.values()]]
        where = filter_conditions(f, "m", args)
        args.append(limit)
        limit_arg = f"${len(args)}"
        columns, join = self._candidate_sql(model, args, now)
        sql = f"""WITH seeds AS (SELECT * FROM unnest($1::text[], $2::float8[]) AS s(id, w)),
                edges1 AS MATERIALIZED (
                    SELECT r.id, r.to_id AS reached, s.w, r.from_id, r.to_id, r.relation, r.confidence
                    FROM relationships r JOIN seeds s ON r.from_id = s.id
                    UNION ALL
                    SELECT r.id, r.from_id, s.w, r.from_id, r.to_id, r.relation, r.confidence
                    FROM relationships r JOIN seeds s ON r.to_id = s.id
                ),
                edges2 AS MATERIALIZED (
                    SELECT r.id, r.to_id AS reached, r.from_id AS via, r.from_id, r.to_id, r.relation,
                           r.confidence
                    FROM relationships r WHERE r.from_id IN (SELECT reached FROM edges1)
                    UNION ALL
                    SELECT r.id, r.from_id, r.to_id, r.from_id, r.to_id, r.relation, r.confidence
                    FROM relationships r WHERE r.to_id IN (SELECT reached FROM edges1)
                ),
                weights AS MATERIALIZED (
                    SELECT r.id, r.confidence,
                           CASE WHEN r.relation = 'episodic_next' THEN {REPLY_WEIGHT} ELSE 1.0 END AS reply
                    FROM (SELECT DISTINCT id, from_id, to_id, relation, confidence
                          FROM (SELECT id, from_id, to_id, relation, confidence FROM edges1
                                UNION ALL
                                SELECT id, from_id, to_id, relation, confidence FROM edges2) x) r
                ),
                h1 AS (SELECT e.reached AS id, max(e.w * x.confidence * x.reply) AS w
                       FROM edges1 e JOIN weights x ON x.id = e.id GROUP BY 1),
                hop2 AS (SELECT e.reached AS id, max(h.w * x.confidence * x.reply * 0.5) AS w
                         FROM edges2 e JOIN h1 h ON h.id = e.via JOIN weights x ON x.id = e.id GROUP BY 1),
                walk AS (SELECT id, max(w) AS w FROM (SELECT * FROM h1 UNION ALL SELECT * FROM hop2) x
                         WHERE id NOT IN (SELECT id FROM seeds) GROUP BY id)
                SELECT w.w AS score, {columns} FROM walk w JOIN memories m ON m.id = w.id {join}
                WHERE {where} ORDER BY w.w DESC, w.id LIMIT {limit_arg}"""
        async with self._pool.acquire() as conn, conn.transaction():
            # One plan for every walk of this form (per connection), not one planned per walk: the
            # walk's plan does not depend on its values (index lookups from a few seeds), and
            # planning it took more time than running it (1.1 of 2.1 ms at 1,000,000 memories).
            await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            rows = await conn.fetch(sql, *args)
        return [(r["id"], float(r["score"])) for r in rows], {r["id"]: _candidate(r) for r in rows}

    def _candidate_sql(self, model: str | None, args: list[Any], now: datetime) -> tuple[str, str]:
        """The select list of a candidate row of memory ``m`` (its activation as of ``now``) and
        the join that reads its vector under ``model``; ``args`` gets their values."""
        args.append(now)
        # What a result shows (RESULT_FIELDS, which hold every field scoring reads): a search then
        # needs no statement after ranking for its results' details (a round trip on its critical path).
        columns = _detail_columns(f"${len(args)}", "m")
        if not (model and self.has_vectors):
            return columns + ", NULL::text AS embedding", ""
        args.append(model)
        return (
            columns + ", e.embedding",
            f"LEFT JOIN memory_embeddings e ON e.memory_id = m.id AND e.model = ${len(args)}",
        )

    async def candidates(self, ids: Sequence[str], model: str | None, now: datetime) -> dict[str, Candidate]:
        """What scoring needs of each memory (and its vector under ``model``, for MMR), in one
        round trip; activation as of ``now`` (the search's time)."""
        args: list[Any] = [list(ids)]
        columns, join = self._candidate_sql(model, args, now)
        rows = await self._pool.fetch(
            f"SELECT {columns} FROM memories m {join} WHERE m.id = ANY($1::text[])", *args
        )
        return {r["id"]: _candidate(r) for r in rows}

    async def details(self, ids: Sequence[str], now: datetime) -> dict[str, dict[str, Any]]:
        """Display fields of result memories (activation as of ``now``)."""
        rows = await self._pool.fetch(
            f"""SELECT {_detail_columns("$2")}
               FROM memories WHERE id = ANY($1::text[])""",
            list(ids),
            now,
        )
        return {r["id"]: dict(r) for r in rows}


class _Shown(Mapping[str, Any]):
    """A candidate row's display fields (:data:`~noema.ports.RESULT_FIELDS`), as :meth:`RecallStore.details`
    gives them; read from the row only for the results a search returns."""

    __slots__ = ("_row",)

    def __init__(self, row: Mapping[str, Any]) -> None:
        self._row = row

    def __getitem__(self, key: str) -> Any:
        if key not in _DETAILS:
            raise KeyError(key)
        return self._row[key]

    def __iter__(self) -> Iterator[str]:
        return iter(RESULT_FIELDS)

    def __len__(self) -> int:
        return len(RESULT_FIELDS)


def _candidate(r: Mapping[str, Any]) -> Candidate:
    """A candidate of a row of :meth:`RecallStore._candidate_sql`'s columns."""
    c = Candidate(
        id=r["id"],
        content=r["content"],
        memory_type=r["memory_type"],
        activation=r["activation"],
        importance=r["importance"],
        credibility=r["credibility"],
        created_at=r["created_at"],
        repo=r["repo"],
        happened_at=r["happened_at"],
        participants=tuple(r["participants"] or ()),
        shown=_Shown(r),
    )
    vec = r["embedding"]
    if vec is not None:
        if isinstance(vec, str):  # a pool without the pgvector codec
            import numpy as np

            vec = np.asarray(json.loads(vec), dtype=np.float32)
        c.vector = vec.to_numpy() if hasattr(vec, "to_numpy") else vec
    return c
