-- Backbone read model: the audit copy of every event, the memory records, and projection tracking.
-- Ids are text: events may come from non-Python publishers; the schemas say what they must hold.

CREATE TABLE projection_position (
    projection  text PRIMARY KEY,
    last_seq    bigint NOT NULL CHECK (last_seq >= 0)
);

-- A second durable copy of the event stream, and the audit log's source.
CREATE TABLE events (
    seq             bigint PRIMARY KEY,
    id              text NOT NULL,
    type            text NOT NULL,
    workspace       text NOT NULL,
    mind            text NOT NULL,
    occurred_at     timestamptz NOT NULL,
    causation_id    text,
    correlation_id  text NOT NULL,
    actor           text NOT NULL,
    subject         text NOT NULL,
    payload         jsonb NOT NULL
);
CREATE INDEX events_id ON events (id);
CREATE INDEX events_workspace_type ON events (workspace, type, seq);
CREATE INDEX events_correlation ON events (correlation_id);

CREATE TABLE memories (
    id                      text PRIMARY KEY,
    workspace               text NOT NULL,
    mind                    text NOT NULL,
    kind                    text NOT NULL
        CHECK (kind IN ('episodic', 'semantic', 'procedural', 'autobiographical')),
    epistemic_kind          text NOT NULL
        CHECK (epistemic_kind IN ('observation', 'fact', 'memory', 'claim', 'hypothesis', 'belief',
                                  'prediction', 'assumption', 'inference', 'opinion')),
    content                 text NOT NULL,
    domain                  text,
    topic                   text,
    repo                    text,
    confidence              double precision NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    importance              double precision NOT NULL CHECK (importance BETWEEN 0 AND 1),
    salience                double precision NOT NULL CHECK (salience BETWEEN 0 AND 1),
    credibility             double precision NOT NULL CHECK (credibility BETWEEN 0 AND 1),
    veracity                text CHECK (veracity IN ('stated', 'inferred', 'tool', 'imported')),
    memory_type             text NOT NULL,
    activation              double precision NOT NULL CHECK (activation > 0),
    activation_at           timestamptz NOT NULL,
    status                  text NOT NULL DEFAULT 'active'
        CHECK (status IN ('active', 'retracted', 'superseded', 'archived')),
    superseded_by           text,
    valid_until             timestamptz,
    recall_count            integer NOT NULL DEFAULT 0,
    mention_count           integer NOT NULL DEFAULT 1,
    source_observation_ids  text[] NOT NULL DEFAULT '{}',
    origin_event            text NOT NULL,
    origin_seq              bigint NOT NULL,
    channel                 text
        CHECK (channel IN ('operator', 'user', 'system', 'tool', 'source', 'low')),
    source                  text,
    participants            text[] NOT NULL DEFAULT '{}',
    steps                   text[] NOT NULL DEFAULT '{}',
    preconditions           text[] NOT NULL DEFAULT '{}',
    outcomes                text[] NOT NULL DEFAULT '{}',
    session                 text,
    happened_at             timestamptz,
    created_at              timestamptz NOT NULL,
    updated_at              timestamptz NOT NULL,
    search                  tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    -- Target of composite foreign keys that keep relationships inside one mind and workspace.
    UNIQUE (id, workspace, mind)
);
CREATE INDEX memories_search ON memories USING gin (search);
CREATE INDEX memories_scope ON memories (workspace, mind, created_at DESC);
CREATE INDEX memories_status ON memories (workspace, status);
