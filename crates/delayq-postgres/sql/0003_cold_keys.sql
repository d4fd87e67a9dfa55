-- delayq's PostgreSQL schema, version 3: a cold job's key beside it, so a key's calls (list,
-- cancel, reschedule every job of a key) read only that key's rows of the cold tier; and the
-- index by id led by the id.
--
-- `key` is the job's key (the `key` of its body; NULL without one), indexed per partition by
-- (queue, key, id in byte order) for rows that have one: a key's page by id is one index range per
-- partition. Rows written before this version get theirs from their body.

ALTER TABLE delayq.cold ADD COLUMN key text;

UPDATE delayq.cold SET key = body::jsonb ->> 'key' WHERE body::jsonb ? 'key';

CREATE INDEX cold_by_key ON delayq.cold (queue, key, id COLLATE "C") WHERE key IS NOT NULL;

-- By id, the id first: a look-up of a batch's ids (`id = ANY(…)`) is then an index condition
-- on every partition whatever the planner believes of a partition's rows — led by the queue,
-- a stale estimate (a partition growing faster than its statistics) made it read the
-- queue's every row instead, each batch.
DROP INDEX delayq.cold_by_id;
CREATE INDEX cold_by_id ON delayq.cold (id, queue);
