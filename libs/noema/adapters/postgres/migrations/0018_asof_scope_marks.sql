-- As-of reads without a scan of the store (noema.adapters.postgres.history).
--
-- A listing as of a point (`memory list`, newest first) reads the versions of `memories_history` in
-- the listing's order: this index has the order of the live table's listing and the version's start,
-- so the versions not yet written at the point (those of the memories created after it) are passed
-- over inside the index, and the walk stops at the page's end; before, every version of the
-- workspace was read and sorted.
CREATE INDEX memories_history_newest ON memories_history (workspace, created_at DESC, origin_seq DESC, valid_from_seq);

-- A scope's size as of a point (recall's BM25 counts and average length; the semantic voice's
-- choice of an exact scan), in a few rows: the memories held at a point are the live memories
-- created by then (migration 0016), so it is the count and the words (`length(search)`) of the
-- workspace's memories up to the point. Counted so, the first read of a point scanned the
-- workspace. A mark says how many memories, and how many words, the workspace held up to sequence
-- `seq`; a count as of a point is its last mark's plus the memories after it up to the point, read
-- by `memories_since`. The projector's inserts write a mark when a statement's memories reach a
-- block of MARK_SEQS (512) sequences the workspace's last mark is not in, at the sequence before
-- the statement's last memory's (an event's memories written by several statements are then all
-- counted), so at most one block and one statement lie between a point and its mark. An erasure,
-- or a change of a memory's words, corrects the marks after the memory's creation. As the word
-- marks (migration 0017) the marks are an index, not state: the checksum does not cover them and a
-- bulk load (replay) writes them once at the end (bulkload.py).

CREATE INDEX memories_since ON memories (workspace, origin_seq);

CREATE TABLE memory_scope_marks (
    workspace text NOT NULL,
    seq       bigint NOT NULL,
    memories  bigint NOT NULL,
    lexemes   bigint NOT NULL,
    PRIMARY KEY (workspace, seq)
);

-- A mark at the last memory of each block of 512 sequences a workspace has memories in (migrations
-- and bulk loads).
CREATE FUNCTION noema_scope_marks_rebuilt() RETURNS void LANGUAGE sql AS $$
    TRUNCATE memory_scope_marks;
    INSERT INTO memory_scope_marks (workspace, seq, memories, lexemes)
    SELECT workspace, seq, (sum(n) OVER w)::bigint, (sum(l) OVER w)::bigint
    FROM (SELECT workspace, max(origin_seq) AS seq, count(*) AS n, coalesce(sum(length(search)), 0) AS l
          FROM memories GROUP BY workspace, origin_seq / 512) b
    WINDOW w AS (PARTITION BY workspace ORDER BY seq);
$$;

CREATE FUNCTION noema_scope_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_scope_marks (workspace, seq, memories, lexemes)
    SELECT s.workspace, s.last - 1, coalesce(s.memories, 0) + c.n, coalesce(s.lexemes, 0) + c.l
    FROM (SELECT s.workspace, s.last, prev.seq, prev.memories, prev.lexemes
          FROM (SELECT workspace, max(origin_seq) AS last FROM new_rows GROUP BY workspace) s
          LEFT JOIN LATERAL (SELECT k.seq, k.memories, k.lexemes FROM memory_scope_marks k
                             WHERE k.workspace = s.workspace ORDER BY k.seq DESC LIMIT 1) prev ON true
          WHERE prev.seq IS NULL OR (s.last - 1) / 512 > prev.seq / 512
          OFFSET 0) s
    CROSS JOIN LATERAL (SELECT count(*) AS n, coalesce(sum(length(m.search)), 0) AS l FROM memories m
                        WHERE m.workspace = s.workspace AND m.origin_seq > coalesce(s.seq, -1)
                          AND m.origin_seq <= s.last - 1) c
    ORDER BY 1
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

-- Each mark at or after a removed memory's creation loses it (summed per mark: an UPDATE ... FROM
-- applies one joined row per target row).
CREATE FUNCTION noema_scope_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_scope_marks k SET memories = k.memories - d.n, lexemes = k.lexemes - d.l
    FROM (SELECT k2.workspace, k2.seq, count(*) AS n, coalesce(sum(length(o.search)), 0) AS l
          FROM old_rows o
          JOIN memory_scope_marks k2 ON k2.workspace = o.workspace AND k2.seq >= o.origin_seq
          GROUP BY 1, 2) d
    WHERE k.workspace = d.workspace AND k.seq = d.seq;
    RETURN NULL;
END
$$;

CREATE FUNCTION noema_scope_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_scope_marks k SET memories = k.memories - 1, lexemes = k.lexemes - length(OLD.search)
    WHERE k.workspace = OLD.workspace AND k.seq >= OLD.origin_seq;
    UPDATE memory_scope_marks k SET memories = k.memories + 1, lexemes = k.lexemes + length(NEW.search)
    WHERE k.workspace = NEW.workspace AND k.seq >= NEW.origin_seq;
    RETURN NULL;
END
$$;

CREATE FUNCTION noema_scope_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE memory_scope_marks;
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_scope_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION noema_scope_added();
CREATE TRIGGER memory_scope_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION noema_scope_removed();
CREATE TRIGGER memory_scope_update AFTER UPDATE OF content, participants, workspace, origin_seq ON memories
    FOR EACH ROW WHEN (OLD.search IS DISTINCT FROM NEW.search OR OLD.workspace IS DISTINCT FROM NEW.workspace
                       OR OLD.origin_seq IS DISTINCT FROM NEW.origin_seq)
    EXECUTE FUNCTION noema_scope_changed();
CREATE TRIGGER memory_scope_truncate AFTER TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION noema_scope_truncated();

SELECT noema_scope_marks_rebuilt();

DO $$
BEGIN
    IF to_regprocedure('noema_workspace_visible(text)') IS NOT NULL THEN
        ALTER TABLE memory_scope_marks ENABLE ROW LEVEL SECURITY;
        CREATE POLICY workspace_scope ON memory_scope_marks
            USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
    END IF;
END
$$;
