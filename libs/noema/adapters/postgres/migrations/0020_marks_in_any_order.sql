-- The as-of marks (memory_term_marks, 0017; memory_scope_marks, 0018) count the memories created up
-- to their sequence. Their insert triggers assumed every memory at or before a new mark was already
-- written. But the projector applies a batch's event types in an order of its own (commuting.py:
-- memory.created before fact.proposed, both insert memories), so a memory can be inserted after a
-- later one, below a mark already written: that mark, and every later one, missed it, while a
-- replay (which rebuilds the marks) counted it. Live and replayed as-of scores could differ.
-- Now each insert first adds its memories to the marks already at or after their creation.

-- The term marks at or after a point of a workspace, found without reading a word's marks: in the
-- usual order (no memory below a mark) the search finds none.
CREATE INDEX memory_term_marks_at ON memory_term_marks (workspace, seq);

CREATE OR REPLACE FUNCTION noema_terms_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_term_marks k SET memories = k.memories + d.n
    FROM (SELECT m.workspace, m.lexeme, m.seq, count(*) AS n
          FROM (SELECT workspace, min(origin_seq) AS lo FROM new_rows GROUP BY 1) b
          JOIN memory_term_marks m ON m.workspace = b.workspace AND m.seq >= b.lo
          JOIN new_rows n ON n.workspace = m.workspace AND n.origin_seq <= m.seq
          CROSS JOIN LATERAL unnest(n.search) u
          WHERE u.lexeme = m.lexeme
          GROUP BY 1, 2, 3) d
    WHERE k.workspace = d.workspace AND k.lexeme = d.lexeme AND k.seq = d.seq;
    -- As 0017: the upsert returns each word's count before and after, so only the words carried
    -- past a multiple of 128 are read again; their mark is at the sequence before the statement's
    -- last memory's (the postings' trigger has written this statement's postings).
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

CREATE OR REPLACE FUNCTION noema_scope_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_scope_marks k SET memories = k.memories + d.n, lexemes = k.lexemes + d.l
    FROM (SELECT k2.workspace, k2.seq, count(*) AS n, coalesce(sum(length(r.search)), 0) AS l
          FROM new_rows r
          JOIN memory_scope_marks k2 ON k2.workspace = r.workspace AND k2.seq >= r.origin_seq
          GROUP BY 1, 2) d
    WHERE k.workspace = d.workspace AND k.seq = d.seq;
    -- As 0018.
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
