-- Workspace knowledge (requirements §5, §7): facts are semantic memories; domains, grants, workspace
-- settings, policies, conflicts, working memory and agent notes are projected from their events.

-- 'hot': a session-scoped item written by remember, which consolidate may promote to a fact.
ALTER TABLE memories ADD COLUMN tier text NOT NULL DEFAULT 'long' CHECK (tier IN ('long', 'hot'));
CREATE INDEX memories_slot ON memories (workspace, domain, topic) WHERE kind = 'semantic' AND status = 'active';
CREATE INDEX memories_hot ON memories (workspace, created_at) WHERE tier = 'hot' AND status = 'active';

-- domain is the qualified key: 'architecture' (workspace-wide) or 'repo:<slug>/architecture'.
CREATE TABLE domains (
    workspace     text NOT NULL,
    domain        text NOT NULL,
    name          text NOT NULL,
    repo          text,
    created_by    text NOT NULL,
    created_at    timestamptz NOT NULL,
    origin_event  text NOT NULL,
    PRIMARY KEY (workspace, domain)
);

-- role '*' is a domain's every-role grant; 'seeded' marks the one a new domain seeds in compatible
-- mode, which strict mode ignores.
CREATE TABLE grants (
    workspace     text NOT NULL,
    role          text NOT NULL,
    domain        text NOT NULL,
    access        text NOT NULL CHECK (access IN ('none', 'read', 'write')),
    seeded        boolean NOT NULL DEFAULT false,
    changed_by    text NOT NULL,
    updated_at    timestamptz NOT NULL,
    origin_event  text NOT NULL,
    PRIMARY KEY (workspace, role, domain)
);

CREATE TABLE workspace_settings (
    workspace     text PRIMARY KEY,
    access_mode   text NOT NULL CHECK (access_mode IN ('compatible', 'strict')),
    updated_at    timestamptz NOT NULL,
    origin_event  text NOT NULL
);

CREATE TABLE policies (
    id               text PRIMARY KEY,
    workspace        text NOT NULL,
    domain           text NOT NULL,
    repo             text,
    rule             text NOT NULL,
    required_role    text,
    active           boolean NOT NULL DEFAULT true,
    superseded_by    text,
    source_fact_ids  text[] NOT NULL DEFAULT '{}',
    proposed_by      text NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    origin_event     text NOT NULL,
    origin_seq       bigint NOT NULL
);
CREATE INDEX policies_active ON policies (workspace, domain) WHERE active;

CREATE TABLE conflicts (
    id            text PRIMARY KEY,
    workspace     text NOT NULL,
    domain        text,
    topic         text,
    winner_id     text NOT NULL,
    loser_id      text NOT NULL,
    rule          text NOT NULL,
    detail        text NOT NULL DEFAULT '',
    decided_by    text NOT NULL,
    created_at    timestamptz NOT NULL,
    origin_event  text NOT NULL,
    origin_seq    bigint NOT NULL
);
CREATE INDEX conflicts_workspace ON conflicts (workspace, domain, origin_seq);

-- A mind's working memory, carried whole by each working_memory.updated event.
CREATE TABLE working_memory (
    workspace     text NOT NULL,
    mind          text NOT NULL,
    capacity      integer NOT NULL CHECK (capacity > 0),
    items         jsonb NOT NULL,
    updated_at    timestamptz NOT NULL,
    origin_event  text NOT NULL,
    PRIMARY KEY (workspace, mind)
);

-- An agent's private scratchpad, carried whole by each notes.updated event.
CREATE TABLE agent_notes (
    workspace     text NOT NULL,
    agent         text NOT NULL,
    notes         text NOT NULL,
    updated_at    timestamptz NOT NULL,
    origin_event  text NOT NULL,
    PRIMARY KEY (workspace, agent)
);
