-- BM25's postings: one row per (lexeme, workspace, memory) of the search column, with the word's
-- term frequency (its occurrences; a participant's name, indexed without weight A, counts 0.4) and
-- the memory's length in distinct lexemes. The text voice scores a query from its words' rows, read
-- by primary key, instead of unnesting every matching memory's whole tsvector (which was most of a
-- recall's database time). Maintained by triggers in the same transaction as the memories, like
-- memory_terms (migration 0007), so the rows are exact and replay rebuilds them.

CREATE TABLE memory_postings (
    lexeme    text NOT NULL,
    workspace text NOT NULL,
    memory_id text NOT NULL,
    tf        float8 NOT NULL,
    dl        integer NOT NULL
);

-- A memory's postings: each lexeme of its search column with the term frequency BM25 uses.
CREATE FUNCTION noema_postings_of(search tsvector) RETURNS TABLE (lexeme text, tf float8, dl integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT u.lexeme,
           coalesce(array_length(u.positions, 1), 1) * CASE WHEN 'A' = ANY(u.weights) THEN 1.0 ELSE 0.4 END,
           length(search)
    FROM unnest(search) u
$$;

CREATE FUNCTION noema_postings_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_postings (lexeme, workspace, memory_id, tf, dl)
    SELECT p.lexeme, n.workspace, n.id, p.tf, p.dl FROM new_rows n, noema_postings_of(n.search) p;
    RETURN NULL;
END
$$;

CREATE FUNCTION noema_postings_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_postings p
    USING (SELECT u.lexeme, o.workspace, o.id FROM old_rows o, unnest(o.search) u) d
    WHERE p.lexeme = d.lexeme AND p.workspace = d.workspace AND p.memory_id = d.id;
    RETURN NULL;
END
$$;

-- Row-level, like memory_terms': only a change of the words or of the workspace touches the rows.
CREATE FUNCTION noema_postings_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_postings p
    USING unnest(OLD.search) u
    WHERE p.lexeme = u.lexeme AND p.workspace = OLD.workspace AND p.memory_id = OLD.id;
    INSERT INTO memory_postings (lexeme, workspace, memory_id, tf, dl)
    SELECT p.lexeme, NEW.workspace, NEW.id, p.tf, p.dl FROM noema_postings_of(NEW.search) p;
    RETURN NULL;
END
$$;

CREATE FUNCTION noema_postings_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE memory_postings;
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_postings_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION noema_postings_added();
CREATE TRIGGER memory_postings_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION noema_postings_removed();
CREATE TRIGGER memory_postings_update AFTER UPDATE OF content, participants, workspace, id ON memories
    FOR EACH ROW WHEN (OLD.search IS DISTINCT FROM NEW.search OR OLD.workspace IS DISTINCT FROM NEW.workspace
                       OR OLD.id IS DISTINCT FROM NEW.id)
    EXECUTE FUNCTION noema_postings_changed();
CREATE TRIGGER memory_postings_truncate AFTER TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION noema_postings_truncated();

-- The existing memories' postings, in key order, before the key exists (one sort and one index
-- build instead of a key lookup per row, inside this migration's lock on memories).
INSERT INTO memory_postings (lexeme, workspace, memory_id, tf, dl)
SELECT p.lexeme, m.workspace, m.id, p.tf, p.dl FROM memories m, noema_postings_of(m.search) p
ORDER BY 1, 2, 3;

-- The key includes tf and dl, so a query's postings are read from the index alone (once vacuum has
-- marked the pages visible): the heap holds them in the order memories were written, one page per
-- posting of a word.
ALTER TABLE memory_postings ADD PRIMARY KEY (lexeme, workspace, memory_id) INCLUDE (tf, dl);

-- The rows name other tenants' words: under row security (migration 0006 where present) they are
-- scoped like the memories they index.
DO $$
BEGIN
    IF to_regprocedure('noema_workspace_visible(text)') IS NOT NULL THEN
        ALTER TABLE memory_postings ENABLE ROW LEVEL SECURITY;
        CREATE POLICY workspace_scope ON memory_postings
            USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
    END IF;
END
$$;
