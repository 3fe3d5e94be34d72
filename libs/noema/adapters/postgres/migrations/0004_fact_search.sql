-- The dispatch preamble searches active facts only: a partial full-text index keeps that search
-- proportional to the facts, not to every episode of the workspace.
CREATE INDEX memories_fact_search ON memories USING gin (search) WHERE kind = 'semantic' AND status = 'active';
