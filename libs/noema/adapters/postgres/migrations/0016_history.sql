-- The read model keeps its own history (as-of reads, noema.composition.asof). Every state table gets
-- a history table beside it, `<table>_history`: the same columns, one row per version of a row, with
-- the stream sequence from which it held (`valid_from_seq`) and until which it held (`valid_to_seq`,
-- NULL while it still holds: the live row's version). The projector writes them in the same
-- transaction as the live rows, by statement-level triggers on the live tables, from `row_seq`: the
-- sequence of the event that last wrote the row, which every handler sets. So a replay rebuilds the
-- history exactly (the replay checksum covers the history tables), a projection rebuild carries it,
-- and the live tables, their indexes and every present read stay as they were.
--
-- An as-of read is the same read code over the versions valid at its point: the schema
-- `<schema>_asof` holds a view of each table the reads use, under the table's own name, selecting
-- the versions valid at the connection's setting `noema.as_of_seq`; an as-of connection puts that
-- schema first on its search path (noema.adapters.postgres.history).
--
-- The projector deletes rows only when it erases content, and the erasure then removes or blanks
-- every version of what it erased itself (erasure_handlers.py), so no DELETE trigger is needed.

CREATE FUNCTION noema_as_of() RETURNS bigint LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(nullif(current_setting('noema.as_of_seq', true), ''), '0')::bigint
$$;

-- Where this schema's history begins: a read model migrated from an earlier release starts its
-- history at its position then (its rows are seeded as versions from seq 0 and points before this
-- one are refused: `noemactl projection rebuild` + `switch` rebuilds the history exactly); a fresh
-- read model at 0.
CREATE TABLE history_start (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    seq  bigint NOT NULL
);
INSERT INTO history_start (seq)
SELECT coalesce((SELECT last_seq FROM projection_position WHERE projection = 'read_model'), 0);

-- Keep `tbl`'s history: add `row_seq`, create `<tbl>_history` seeded with the rows as they are, its
-- row security as `tbl`'s, and the triggers that write it.
CREATE FUNCTION noema_keep_history(tbl text, keys text[]) RETURNS void LANGUAGE plpgsql AS $gen$
DECLARE
    hist text := tbl || '_history';
    fn text := 'noema_history_' || tbl;
    cols text;
    excluded text;
    keylist text;
    keyeq text;
    pol record;
BEGIN
    EXECUTE format('ALTER TABLE %I ADD COLUMN row_seq bigint NOT NULL DEFAULT 0', tbl);
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING GENERATED)', hist, tbl);
    EXECUTE format('ALTER TABLE %I ADD COLUMN valid_from_seq bigint NOT NULL, '
                   'ADD COLUMN valid_to_seq bigint', hist);
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum),
           string_agg('excluded.' || quote_ident(attname), ', ' ORDER BY attnum)
      INTO cols, excluded
      FROM pg_attribute
     WHERE attrelid = tbl::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = '';
    SELECT string_agg(quote_ident(k), ', '), string_agg(format('h.%1$I = n.%1$I', k), ' AND ')
      INTO keylist, keyeq FROM unnest(keys) k;
    EXECUTE format('ALTER TABLE %I ADD PRIMARY KEY (%s, valid_from_seq)', hist, keylist);
    EXECUTE format('INSERT INTO %I (%s, valid_from_seq) SELECT %s, row_seq FROM %I', hist, cols, cols, tbl);
    -- An update closes each row's open version at the event that changed it and opens the new
    -- one; a second change by the same event (row_seq unchanged) rewrites that event's version.
    EXECUTE format($f$
        CREATE FUNCTION %1$I() RETURNS trigger LANGUAGE plpgsql AS $body$
        BEGIN
            IF TG_OP = 'UPDATE' THEN
                UPDATE %2$I h SET valid_to_seq = n.row_seq FROM new_rows n
                WHERE %3$s AND h.valid_to_seq IS NULL AND h.valid_from_seq < n.row_seq;
            END IF;
            INSERT INTO %2$I (%4$s, valid_from_seq) SELECT %4$s, row_seq FROM new_rows
            ON CONFLICT (%5$s, valid_from_seq) DO UPDATE SET (%4$s) = ROW(%6$s);
            RETURN NULL;
        END
        $body$$f$, fn, hist, keyeq, cols, keylist, excluded);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS new_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION %I()', tbl || '_history_insert', tbl, fn);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING NEW TABLE AS new_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION %I()', tbl || '_history_update', tbl, fn);
    IF (SELECT relrowsecurity FROM pg_class WHERE oid = tbl::regclass) THEN
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', hist);
        FOR pol IN SELECT policyname, qual, with_check FROM pg_policies
                   WHERE schemaname = current_schema() AND tablename = tbl LOOP
            EXECUTE format('CREATE POLICY %I ON %I USING (%s) WITH CHECK (%s)',
                           pol.policyname, hist, pol.qual, coalesce(pol.with_check, pol.qual));
        END LOOP;
    END IF;
END
$gen$;

SELECT noema_keep_history('memories', ARRAY['id']);
SELECT noema_keep_history('relationships', ARRAY['id']);
SELECT noema_keep_history('memory_embeddings', ARRAY['memory_id', 'model']);
SELECT noema_keep_history('domains', ARRAY['workspace', 'domain']);
SELECT noema_keep_history('grants', ARRAY['workspace', 'role', 'domain']);
SELECT noema_keep_history('workspace_settings', ARRAY['workspace']);
SELECT noema_keep_history('policies', ARRAY['id']);
SELECT noema_keep_history('conflicts', ARRAY['id']);
SELECT noema_keep_history('working_memory', ARRAY['workspace', 'mind']);
SELECT noema_keep_history('agent_notes', ARRAY['workspace', 'agent']);

-- The as-of reads' indexes: the live tables' own, over the versions (the primary keys serve the
-- reads by id).
CREATE INDEX memories_history_scope ON memories_history (workspace, mind, created_at DESC);
CREATE INDEX memories_history_recent ON memories_history (workspace, (coalesce(happened_at, created_at)) DESC);
-- Full text over the versions of facts only (the preamble's facts; recall's text voice reads the
-- postings): every memory's would double the cost of the projector's full-text upkeep.
CREATE INDEX memories_history_fact_search ON memories_history USING gin (search) WITH (fastupdate = off)
    WHERE kind = 'semantic';
CREATE INDEX memories_history_slot ON memories_history (workspace, domain, topic) WHERE kind = 'semantic';
CREATE INDEX relationships_history_from ON relationships_history (from_id);
CREATE INDEX relationships_history_to ON relationships_history (to_id);
CREATE INDEX policies_history_scope ON policies_history (workspace, domain);
CREATE INDEX conflicts_history_scope ON conflicts_history (workspace, domain, origin_seq);

-- BM25's postings as of a point: a memory's words change only by erasure, which blanks every version
-- of it, so the postings held at a point are those of the memories created by then. Each posting
-- carries its memory's creation sequence, and a covering index counts and reads a word's postings
-- up to a point without touching the memories.
ALTER TABLE memory_postings ADD COLUMN origin_seq bigint NOT NULL DEFAULT 0;
UPDATE memory_postings p SET origin_seq = m.origin_seq FROM memories m WHERE m.id = p.memory_id;
CREATE INDEX memory_postings_since ON memory_postings (lexeme, workspace, origin_seq) INCLUDE (memory_id, tf, dl);

CREATE OR REPLACE FUNCTION noema_postings_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_postings (lexeme, workspace, memory_id, tf, dl, origin_seq)
    SELECT p.lexeme, n.workspace, n.id, p.tf, p.dl, n.origin_seq FROM new_rows n, noema_postings_of(n.search) p;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION noema_postings_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_postings p
    USING unnest(OLD.search) u
    WHERE p.lexeme = u.lexeme AND p.workspace = OLD.workspace AND p.memory_id = OLD.id;
    INSERT INTO memory_postings (lexeme, workspace, memory_id, tf, dl, origin_seq)
    SELECT p.lexeme, NEW.workspace, NEW.id, p.tf, p.dl, NEW.origin_seq FROM noema_postings_of(NEW.search) p;
    RETURN NULL;
END
$$;

-- The views of the as-of schema: each table as it stood at `noema_as_of()`.
DO $$
DECLARE
    live text := current_schema();
    asof text := current_schema() || '_asof';
    tbl text;
    cols text;
BEGIN
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', asof);
    FOREACH tbl IN ARRAY ARRAY['memories', 'relationships', 'memory_embeddings', 'domains', 'grants',
                               'workspace_settings', 'policies', 'conflicts', 'working_memory',
                               'agent_notes'] LOOP
        SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO cols FROM pg_attribute
         WHERE attrelid = format('%I.%I', live, tbl)::regclass AND attnum > 0 AND NOT attisdropped;
        EXECUTE format('CREATE VIEW %I.%I WITH (security_invoker = true) AS SELECT %s FROM %I.%I '
                       'WHERE valid_from_seq <= %I.noema_as_of() '
                       'AND (valid_to_seq IS NULL OR valid_to_seq > %I.noema_as_of())',
                       asof, tbl, cols, live, tbl || '_history', live, live);
    END LOOP;
    -- The audit copy: the events stored by then.
    EXECUTE format('CREATE VIEW %I.events WITH (security_invoker = true) AS SELECT * FROM %I.events '
                   'WHERE seq <= %I.noema_as_of()', asof, live, live);
    -- BM25's postings and word counts: those of the memories created by then (above).
    EXECUTE format('CREATE VIEW %I.memory_postings WITH (security_invoker = true) AS '
                   'SELECT lexeme, workspace, memory_id, tf, dl, origin_seq FROM %I.memory_postings '
                   'WHERE origin_seq <= %I.noema_as_of()', asof, live, live);
    EXECUTE format('CREATE VIEW %I.memory_terms WITH (security_invoker = true) AS '
                   'SELECT workspace, lexeme, count(*)::integer AS memories FROM %I.memory_postings '
                   'GROUP BY workspace, lexeme', asof, asof);
    EXECUTE format('CREATE VIEW %I.projection_position WITH (security_invoker = true) AS '
                   'SELECT projection, least(last_seq, %I.noema_as_of()) AS last_seq '
                   'FROM %I.projection_position', asof, live, live);
END
$$;

-- `memory show` lists the events that name a memory: an index of every id-like string value of each
-- event's payload (1–200 characters, no white space), kept by a trigger in the projector's
-- transaction, so the lookup reads a few index entries instead of every event of the workspace. As
-- of a point, the as-of `events` view keeps only the events stored by then.
CREATE TABLE event_citations (
    ref        text NOT NULL,
    workspace  text NOT NULL,
    seq        bigint NOT NULL,
    PRIMARY KEY (ref, workspace, seq)
);

CREATE FUNCTION noema_cited(payload jsonb) RETURNS SETOF text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT DISTINCT v #>> '{}' FROM jsonb_path_query(payload, 'strict $.**') v
    WHERE jsonb_typeof(v) = 'string' AND length(v #>> '{}') BETWEEN 1 AND 200 AND (v #>> '{}') !~ '\s'
$$;

CREATE FUNCTION noema_citations_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event_citations (ref, workspace, seq)
    SELECT c, n.workspace, n.seq FROM new_rows n, noema_cited(n.payload) c
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER event_citations_insert AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION noema_citations_added();

INSERT INTO event_citations (ref, workspace, seq)
SELECT c, e.workspace, e.seq FROM events e, noema_cited(e.payload) c ON CONFLICT DO NOTHING;

DO $$
BEGIN
    IF to_regprocedure('noema_workspace_visible(text)') IS NOT NULL THEN
        ALTER TABLE event_citations ENABLE ROW LEVEL SECURITY;
        CREATE POLICY workspace_scope ON event_citations
            USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
    END IF;
END
$$;
