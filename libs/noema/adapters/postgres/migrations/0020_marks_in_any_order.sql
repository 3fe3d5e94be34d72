-- The as-of marks (memory_term_marks, 0017; memory_scope_marks, 0018) count the memories created up
-- to their sequence. Their insert triggers assumed every memory at or before a new mark was already
-- written. But the projector applies a batch's event types in an order of its own (commuting.py:
-- memory.created before fact.proposed, both insert memories), so a memory can be inserted after a
-- later one, below a mark already written: that mark, and every later one, missed it, while a
-- replay (which rebuilds the marks) counted it. Live and replayed as-of scores could differ.
-- Now each insert first adds its memories to the marks already at or after their creation: a
-- trigger of its own, named to fire before the triggers that write new marks (triggers fire in name
-- order), so a mark this statement writes is not corrected twice.

-- The term marks at or after a point of a workspace, found without reading a word's marks: in the
-- usual order (no memory below a mark) the search finds none.
CREATE INDEX memory_term_marks_at ON memory_term_marks (workspace, seq);

CREATE FUNCTION noema_marks_below() RETURNS trigger LANGUAGE plpgsql AS $$
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
    UPDATE memory_scope_marks k SET memories = k.memories + d.n, lexemes = k.lexemes + d.l
    FROM (SELECT k2.workspace, k2.seq, count(*) AS n, coalesce(sum(length(r.search)), 0) AS l
          FROM new_rows r
          JOIN memory_scope_marks k2 ON k2.workspace = r.workspace AND k2.seq >= r.origin_seq
          GROUP BY 1, 2) d
    WHERE k.workspace = d.workspace AND k.seq = d.seq;
    RETURN NULL;
END
$$;

-- "memory_marks_insert" sorts before memory_postings_insert, memory_scope_insert and
-- memory_terms_insert.
CREATE TRIGGER memory_marks_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION noema_marks_below();
