-- Row-level security on every tenant table, keyed by workspace: defence in depth under the queries'
-- own `workspace = $n` conditions. A connection sees the rows of the workspace named by the setting
-- `noema.workspace` (set per connection or per acquired connection, see
-- noema.adapters.postgres.tenancy): '*' is every workspace, unset or '' is none. The tables' owner
-- (the migration role), superusers and the projector's role (BYPASSRLS: it writes every workspace,
-- with COPY, which row security forbids) are not subject to these policies; the reader role is.

-- A single expression, so the planner inlines it into each policy.
CREATE FUNCTION noema_workspace_visible(ws text) RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(current_setting('noema.workspace', true), '') = '*'
           OR (ws <> '' AND ws = current_setting('noema.workspace', true))
$$;

ALTER TABLE events ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_scope ON events
    USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
ALTER TABLE memories ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_scope ON memories
    USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
ALTER TABLE relationships ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_scope ON relationships
    USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
ALTER TABLE domains ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_scope ON domains
    USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
ALTER TABLE grants ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_scope ON grants
    USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
ALTER TABLE workspace_settings ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_scope ON workspace_settings
    USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
ALTER TABLE policies ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_scope ON policies
    USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
ALTER TABLE conflicts ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_scope ON conflicts
    USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
ALTER TABLE working_memory ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_scope ON working_memory
    USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));
ALTER TABLE agent_notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_scope ON agent_notes
    USING (noema_workspace_visible(workspace)) WITH CHECK (noema_workspace_visible(workspace));

-- Vectors carry no workspace column: a vector is visible when its memory is (the lookup is itself
-- subject to the memories policy). A function, not an EXISTS in the policy: the planner would turn
-- that into a hash of every visible memory id on each query, where a nearest-neighbour scan needs
-- one primary-key lookup per candidate. '*' skips the lookup.
CREATE FUNCTION noema_memory_visible(memory_id text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
    SELECT EXISTS (SELECT 1 FROM memories m WHERE m.id = memory_id)
$$;
ALTER TABLE memory_embeddings ENABLE ROW LEVEL SECURITY;
CREATE POLICY workspace_scope ON memory_embeddings
    USING (coalesce(current_setting('noema.workspace', true), '') = '*' OR noema_memory_visible(memory_id))
    WITH CHECK (coalesce(current_setting('noema.workspace', true), '') = '*'
                OR noema_memory_visible(memory_id));

-- The projector creates a model's HNSW index on its first vector; CREATE INDEX needs the table's
-- owner, so the projector role calls this (owner's rights) instead. Only the name pattern and the
-- model-name pattern the projector uses are accepted, and the statement is fixed but for them.
CREATE FUNCTION noema_ensure_vector_index(index_name text, model text, dims integer) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF index_name !~ '^memory_embeddings_hnsw_[0-9a-f]{10}$' OR model !~ '^[\w./:-]{1,200}$'
       OR dims NOT BETWEEN 1 AND 16000 THEN
        RAISE EXCEPTION 'refusing vector index % for model % (% dimensions)', index_name, model, dims;
    END IF;
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON memory_embeddings '
                   'USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WHERE model = %L',
                   index_name, dims, model);
END
$$;
REVOKE ALL ON FUNCTION noema_ensure_vector_index(text, text, integer) FROM PUBLIC;
