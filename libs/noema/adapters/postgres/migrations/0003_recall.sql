-- Recall: full text covers who took part (episodic participants) as well as the content, and the
-- temporal voice reads recent memories of a workspace by an index.

-- array_to_string is only STABLE in general; for text[] it is immutable, which a generated column needs.
CREATE FUNCTION noema_join_words(words text[]) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT array_to_string(words, ' ') $$;

DROP INDEX memories_search;
ALTER TABLE memories DROP COLUMN search;
ALTER TABLE memories ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', content), 'A')
    || setweight(to_tsvector('simple', noema_join_words(participants)), 'B')
) STORED;
CREATE INDEX memories_search ON memories USING gin (search);
CREATE INDEX memories_recent ON memories (workspace, (coalesce(happened_at, created_at)) DESC);
