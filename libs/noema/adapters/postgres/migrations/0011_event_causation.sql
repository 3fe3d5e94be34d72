-- `noemactl why` follows causation ids down from an event to the events it caused: an index lookup
-- instead of a scan of the audit copy. Partial: most events start their own chain (no causation).
CREATE INDEX events_causation ON events (causation_id) WHERE causation_id IS NOT NULL;
