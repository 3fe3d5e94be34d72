-- The full-text indexes take each new memory into the index at once instead of queueing it in a
-- pending list (GIN's fastupdate, on by default). With a pending list, every search scans the
-- unsorted queue as it grows, and the insert that finds it full (4 MB) merges it into the index
-- inside the projector's transaction: searches and projection stall together for seconds. Without
-- it each insert costs a little more, always the same.
ALTER INDEX memories_search SET (fastupdate = off);
ALTER INDEX memories_fact_search SET (fastupdate = off);
-- What is already queued is merged now (turning the option off does not flush it).
SELECT gin_clean_pending_list('memories_search'::regclass);
SELECT gin_clean_pending_list('memories_fact_search'::regclass);
