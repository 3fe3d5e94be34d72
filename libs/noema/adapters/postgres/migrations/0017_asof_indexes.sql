-- As-of vector search through the live vector index (noema.adapters.postgres.history).
--
-- A vector's open version in `memory_embeddings_history` is its live row (the history triggers of
-- migration 0016 write it from the row, valid from its `row_seq`), so the vectors valid at a point
-- are the live rows written by then and the closed versions valid then. A search as of a point
-- walks the live table's HNSW index (one per model) filtered on `row_seq`, as a search of the
-- present walks it (RecallStore.past_semantic_sql), and reads the closed versions valid then by
-- this partial index of the closed ones only. The projector never changes a vector once written
-- (`ON CONFLICT DO NOTHING`; erasure deletes every version), so the index stays empty and costs
-- the writes nothing; should a vector ever be replaced, its older version is still found.

CREATE INDEX memory_embeddings_history_closed ON memory_embeddings_history (model, valid_from_seq)
    WHERE valid_to_seq IS NOT NULL;

-- A word's count as of a point (recall's and the preamble's choice of selective words, as of it),
-- in a few rows. The postings held at a point are those of the memories created by then (migration
-- 0016), so the count is that of the word's postings up to the point; counted one by one, a common
-- word's range holds most of the workspace. So the count is kept every MARK_EVERY (128) postings of
-- a word: a mark says how many of the word's postings the workspace held up to sequence `seq`
-- (those of memories created by then), and a count as of a point is its last mark's plus the few
-- postings after it. The marks are written by the word counts' trigger as a statement's new
-- memories carry a word past a multiple of 128 (`memory_terms`' upsert says which: no other row is
-- read for the other words), at the sequence before the statement's last memory's, so no later
-- statement adds to what the mark counts. An erasure or a change of a memory's words corrects the
-- marks after the memory's creation. The marks are an index, not state: positions depend on how
-- the memories were batched, the counts they give do not; the checksum does not cover them and a
-- bulk load (replay) writes them once at the end, every 128th posting of each word (bulkload.py).

CREATE TABLE memory_term_marks (
    workspace text NOT NULL,
    lexeme    text NOT NULL,
    seq       bigint NOT NULL,
    memories  integer NOT NULL,
    PRIMARY KEY (workspace, lexeme, seq)
);

-- Every 128th posting of each word as a mark at the sequence before its memory's (migrations and
-- bulk loads): the postings before it, by rank.
CREATE FUNCTION noema_term_marks_rebuilt() RETURNS void LANGUAGE sql AS $$
    TRUNCATE memory_term_marks;
    INSERT INTO memory_term_marks (workspace, lexeme, seq, memories)
    SELECT workspace, lexeme, origin_seq - 1, below
    FROM (SELECT workspace, lexeme, origin_seq,
                 row_number() OVER w AS n, rank() OVER w - 1 AS below
          FROM memory_postings WINDOW w AS (PARTITION BY workspace, lexeme ORDER BY origin_seq)) p
    WHERE n % 128 = 0
    ON CONFLICT DO NOTHING;
$$;

CREATE OR REPLACE FUNCTION noema_terms_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The upsert returns each word's count before and after (PostgreSQL 18's RETURNING old/new), so
    -- only the words carried past a multiple of 128 are read again (the trigger's own NEW
    -- and OLD are variables here: the rows are named otherwise). Their mark is at the sequence
    -- before the statement's last memory's; the postings' trigger (memory_postings_insert) has
    -- written this statement's postings (triggers fire in name order).
    WITH counted AS (
        INSERT INTO memory_terms AS t (workspace, lexeme, memories)
        SELECT n.workspace, u.lexeme, count(*) FROM new_rows n, unnest(n.search) u
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (workspace, lexeme) DO UPDATE SET memories = t.memories + excluded.memories
        RETURNING WITH (OLD AS was, NEW AS is_now)
            is_now.workspace, is_now.lexeme, is_now.memories AS now, coalesce(was.memories, 0) AS before
    )
    INSERT INTO memory_term_marks (workspace, lexeme, seq, memories)
    SELECT c.workspace, c.lexeme, s.last - 1,
           coalesce(prev.memories, 0)
           + (SELECT count(*) FROM memory_postings p
              WHERE p.lexeme = c.lexeme AND p.workspace = c.workspace
                AND p.origin_seq > coalesce(prev.seq, -1) AND p.origin_seq <= s.last - 1)
    FROM counted c
    CROSS JOIN (SELECT max(origin_seq) AS last FROM new_rows) s
    LEFT JOIN LATERAL (SELECT k.seq, k.memories FROM memory_term_marks k
                       WHERE k.workspace = c.workspace AND k.lexeme = c.lexeme
                       ORDER BY k.seq DESC LIMIT 1) prev ON true
    WHERE c.now / 128 > c.before / 128
      AND (prev.seq IS NULL OR prev.seq < s.last - 1)
    ORDER BY 1, 2
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION noema_terms_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_terms t SET memories = t.memories - d.n
    FROM (SELECT o.workspace, u.lexeme, count(*) AS n FROM old_rows o, unnest(o.search) u
          GROUP BY 1, 2 ORDER BY 1, 2) d
    WHERE t.workspace = d.workspace AND t.lexeme = d.lexeme;
    UPDATE memory_term_marks k SET memories = k.memories - d.n
    FROM (SELECT o.workspace, u.lexeme, o.origin_seq, count(*) AS n FROM old_rows o, unnest(o.search) u
          GROUP BY 1, 2, 3) d
    WHERE k.workspace = d.workspace AND k.lexeme = d.lexeme AND k.seq >= d.origin_seq;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION noema_terms_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_terms t SET memories = t.memories - 1
    FROM unnest(OLD.search) u WHERE t.workspace = OLD.workspace AND t.lexeme = u.lexeme;
    INSERT INTO memory_terms AS t (workspace, lexeme, memories)
    SELECT NEW.workspace, u.lexeme, 1 FROM unnest(NEW.search) u ORDER BY 2
    ON CONFLICT (workspace, lexeme) DO UPDATE SET memories = t.memories + 1;
    UPDATE memory_term_marks k SET memories = k.memories - 1
    FROM unnest(OLD.search) u
    WHERE k.workspace = OLD.workspace AND k.lexeme = u.lexeme AND k.seq >= OLD.origin_seq;
    UPDATE memory_term_marks k SET memories = k.memories + 1
    FROM unnest(NEW.search) u
    WHERE k.workspace = NEW.workspace AND k.lexeme = u.lexeme AND k.seq >= NEW.origin_seq;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION noema_terms_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE memory_terms, memory_term_marks;
    RETURN NULL;
END
$$;

SELECT noema_term_marks_rebuilt();

DO $$
BEGIN
    IF to_regprocedure('noema_workspace_visible(text)') IS NOT NULL THEN
        ALTER TABLE memory_term_marks ENABLE ROW LEVEL SECURITY;
        CREATE POLICY workspace_scope ON memory_term_marks
            USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
    END IF;
END
$$;

-- The as-of word counts: each word the workspace holds now (a word's postings go only by erasure,
-- which removes them from every point), counted as of the point from its last mark by then.
DO $$
DECLARE
    live text := current_schema();
    asof text := current_schema() || '_asof';
BEGIN
    EXECUTE format($v$
        CREATE OR REPLACE VIEW %1$I.memory_terms WITH (security_invoker = true) AS
        SELECT t.workspace, t.lexeme,
               (coalesce(k.memories, 0)
                + (SELECT count(*) FROM %2$I.memory_postings p
                   WHERE p.lexeme = t.lexeme AND p.workspace = t.workspace
                     AND p.origin_seq > coalesce(k.seq, -1) AND p.origin_seq <= %2$I.noema_as_of()))::integer
               AS memories
        FROM %2$I.memory_terms t
        LEFT JOIN LATERAL (SELECT k.seq, k.memories FROM %2$I.memory_term_marks k
                           WHERE k.workspace = t.workspace AND k.lexeme = t.lexeme
                             AND k.seq <= %2$I.noema_as_of()
                           ORDER BY k.seq DESC LIMIT 1) k ON true
        $v$, asof, live);
END
$$;
