-- Per-workspace word counts: how many memories of each workspace contain each lexeme of the search
-- column. Recall decides which query words are too common to match on from these counts (within the
-- workspace searched), so one tenant's data never changes another's results. Maintained by triggers
-- in the same transaction as the memories, so the counts are exact; a query reads a handful of rows
-- by primary key. (Numbered 0007: 0006 is taken by row security on another branch.)

CREATE TABLE memory_terms (
    workspace text NOT NULL,
    lexeme    text NOT NULL,
    memories  integer NOT NULL,
    PRIMARY KEY (workspace, lexeme)
);

-- Statement-level with transition tables: a multi-row INSERT (or COPY) costs one grouped upsert. Rows
-- are upserted in key order, so concurrent writers lock them in the same order (no deadlock).
CREATE FUNCTION noema_terms_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_terms AS t (workspace, lexeme, memories)
    SELECT n.workspace, u.lexeme, count(*) FROM new_rows n, unnest(n.search) u
    GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (workspace, lexeme) DO UPDATE SET memories = t.memories + excluded.memories;
    RETURN NULL;
END
$$;

CREATE FUNCTION noema_terms_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_terms t SET memories = t.memories - d.n
    FROM (SELECT o.workspace, u.lexeme, count(*) AS n FROM old_rows o, unnest(o.search) u
          GROUP BY 1, 2 ORDER BY 1, 2) d
    WHERE t.workspace = d.workspace AND t.lexeme = d.lexeme;
    RETURN NULL;
END
$$;

-- Updates are row-level (transition tables cannot be limited to some columns, and activation, status
-- and decay updates are frequent): only a change of the words or of the workspace touches the counts.
CREATE FUNCTION noema_terms_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_terms t SET memories = t.memories - 1
    FROM unnest(OLD.search) u WHERE t.workspace = OLD.workspace AND t.lexeme = u.lexeme;
    INSERT INTO memory_terms AS t (workspace, lexeme, memories)
    SELECT NEW.workspace, u.lexeme, 1 FROM unnest(NEW.search) u ORDER BY 2
    ON CONFLICT (workspace, lexeme) DO UPDATE SET memories = t.memories + 1;
    RETURN NULL;
END
$$;

CREATE FUNCTION noema_terms_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE memory_terms;
    RETURN NULL;
END
$$;

CREATE TRIGGER memory_terms_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION noema_terms_added();
CREATE TRIGGER memory_terms_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION noema_terms_removed();
CREATE TRIGGER memory_terms_update AFTER UPDATE OF content, participants, workspace ON memories
    FOR EACH ROW WHEN (OLD.search IS DISTINCT FROM NEW.search OR OLD.workspace IS DISTINCT FROM NEW.workspace)
    EXECUTE FUNCTION noema_terms_changed();
CREATE TRIGGER memory_terms_truncate AFTER TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION noema_terms_truncated();

INSERT INTO memory_terms (workspace, lexeme, memories)
SELECT m.workspace, u.lexeme, count(*) FROM memories m, unnest(m.search) u GROUP BY 1, 2;

-- The counts name other tenants' words: under row security (migration 0006 where present) they are
-- scoped like the memories they count.
DO $$
BEGIN
    IF to_regprocedure('noema_workspace_visible(text)') IS NOT NULL THEN
        ALTER TABLE memory_terms ENABLE ROW LEVEL SECURITY;
        CREATE POLICY workspace_scope ON memory_terms
            USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
    END IF;
END
$$;
