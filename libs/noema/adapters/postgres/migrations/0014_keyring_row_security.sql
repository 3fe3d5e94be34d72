-- The keyring (0013) under row-level security, like every tenant table (0006): a connection sees and
-- adds the data keys and key links of the workspace its setting noema.workspace names ('*' every
-- workspace; unset or empty none). A reader query that forgets its workspace condition inside a
-- workspace-scoped request (the API's, the agent service's, MCP's) then cannot read another
-- workspace's keys. The projector (BYPASSRLS) and the keyring's owner are not subject to it.
--
-- The keyring is shared by every read-model schema of the database: the policy names no function of
-- a schema, and the first migration run by the keyring's owner (or a superuser) creates it; later
-- ones, or another role's, find it and leave it as it is.
DO $$
DECLARE
    t text;
    visible constant text := $p$(coalesce(current_setting('noema.workspace', true), '') = '*'
        OR (workspace <> '' AND workspace = current_setting('noema.workspace', true)))$p$;
BEGIN
    FOREACH t IN ARRAY ARRAY['data_keys', 'key_links'] LOOP
        IF EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = 'noema_keyring' AND c.relname = t
                     AND pg_has_role(current_user, c.relowner, 'USAGE'))
           AND NOT EXISTS (SELECT 1 FROM pg_policies
                           WHERE schemaname = 'noema_keyring' AND tablename = t
                             AND policyname = 'workspace_scope') THEN
            EXECUTE format('ALTER TABLE noema_keyring.%I ENABLE ROW LEVEL SECURITY', t);
            EXECUTE format('CREATE POLICY workspace_scope ON noema_keyring.%I USING %s WITH CHECK %s',
                           t, visible, visible);
        END IF;
    END LOOP;
END
$$;
