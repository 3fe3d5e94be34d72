-- Erasure (docs/privacy.md). Content fields of events are sealed under a data key per item (a memory,
-- or the memory an observation becomes); erasing an item destroys its key, so its content cannot be
-- read from the stream or the events table again, and the read model's copy is blanked by the
-- content.erased event's projection.
--
-- The keyring is not part of the read model: it lives once per database, in its own schema, beside
-- every read-model schema (live, replay_*, as-of, projection versions), and is never rebuilt from the
-- stream (a replay needs the live keys to open what is still readable, and must not bring back
-- destroyed ones). Whoever migrates first creates it (the schema owner, given it by prepare_database);
-- later migrations of other schemas find it in the catalog and leave it as it is.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'noema_keyring') THEN
        CREATE SCHEMA noema_keyring;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = 'noema_keyring' AND c.relname = 'data_keys') THEN
        CREATE TABLE noema_keyring.data_keys (
            key_id        text PRIMARY KEY,
            workspace     text NOT NULL,
            key           bytea,            -- NULL once destroyed: the item is erased
            created_at    timestamptz NOT NULL DEFAULT now(),
            destroyed_at  timestamptz,
            erasure_id    text
        );
        -- What an item's key answers for: the subjects its content is about (declared when it was
        -- observed) and the items it was derived from (a memory's source observations or memories),
        -- so an erasure finds every key that holds content of a subject or of an item.
        CREATE TABLE noema_keyring.key_links (
            workspace  text NOT NULL,
            kind       text NOT NULL CHECK (kind IN ('subject', 'source')),
            value      text NOT NULL,
            key_id     text NOT NULL,
            PRIMARY KEY (workspace, kind, value, key_id)
        );
    END IF;
END
$$;

-- A memory whose content was erased keeps its row (ids, times, scores, provenance) with its content
-- blanked, and says when and by which erasure.
ALTER TABLE memories
    ADD COLUMN erased_at timestamptz,
    ADD COLUMN erasure_id text;
