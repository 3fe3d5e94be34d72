-- Memory model: decay classes, activation functions, relationships kept inside one mind, embeddings.

ALTER TABLE memories ADD CONSTRAINT memories_memory_type CHECK (memory_type IN (
    'profile', 'convention', 'fact', 'decision', 'preference', 'insight', 'observation', 'event',
    'task', 'request', 'commitment'));
DROP INDEX memories_status;

-- The activation formulas of noema.domain.dynamics, so the projector applies them in bulk SQL.
CREATE FUNCTION noema_decay(activation float8, dt_days float8, importance float8, half_life_days float8)
RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN dt_days <= 0 THEN activation
                -- the exponent is bounded so power() cannot underflow (the floor applies long before)
                ELSE greatest(1e-6, activation * power(2::float8,
                         greatest(-1000::float8, -dt_days / (half_life_days * (1 + importance)))))
           END
$$;

CREATE FUNCTION noema_days(later timestamptz, earlier timestamptz)
RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (extract(epoch FROM later) - extract(epoch FROM earlier))::float8 / 86400::float8
$$;

-- An edge between two memories. The composite foreign keys make PostgreSQL itself refuse an edge
-- whose ends belong to another mind or workspace than the edge.
CREATE TABLE relationships (
    id              text PRIMARY KEY,
    workspace       text NOT NULL,
    mind            text NOT NULL,
    from_id         text NOT NULL,
    to_id           text NOT NULL,
    relation        text NOT NULL CHECK (relation IN ('related_to', 'supports', 'contradicts', 'derived_from',
                                                      'supersedes', 'part_of', 'caused_by', 'episodic_next')),
    confidence      double precision NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    source          text NOT NULL DEFAULT '',
    origin_event    text NOT NULL,
    origin_seq      bigint NOT NULL,
    created_at      timestamptz NOT NULL,
    CHECK (from_id <> to_id),
    FOREIGN KEY (from_id, workspace, mind) REFERENCES memories (id, workspace, mind),
    FOREIGN KEY (to_id, workspace, mind) REFERENCES memories (id, workspace, mind)
);
CREATE INDEX relationships_from ON relationships (from_id);
CREATE INDEX relationships_to ON relationships (to_id);

-- One vector per (memory, model), with the model and dimensions on every row so vector spaces never
-- mix. With pgvector the column is a vector (HNSW index per model, created on first use); without
-- it, a real[] keeps the data and recall runs without the vector voice.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
        EXECUTE 'CREATE TABLE memory_embeddings (
            memory_id     text NOT NULL REFERENCES memories (id),
            model         text NOT NULL,
            dimensions    integer NOT NULL CHECK (dimensions > 0),
            embedding     vector NOT NULL CHECK (vector_dims(embedding) = dimensions),
            origin_event  text NOT NULL,
            origin_seq    bigint NOT NULL,
            created_at    timestamptz NOT NULL,
            PRIMARY KEY (memory_id, model))';
    ELSE
        EXECUTE 'CREATE TABLE memory_embeddings (
            memory_id     text NOT NULL REFERENCES memories (id),
            model         text NOT NULL,
            dimensions    integer NOT NULL CHECK (dimensions > 0),
            embedding     real[] NOT NULL CHECK (cardinality(embedding) = dimensions),
            origin_event  text NOT NULL,
            origin_seq    bigint NOT NULL,
            created_at    timestamptz NOT NULL,
            PRIMARY KEY (memory_id, model))';
    END IF;
END
$$;
CREATE INDEX memory_embeddings_model ON memory_embeddings (model);
