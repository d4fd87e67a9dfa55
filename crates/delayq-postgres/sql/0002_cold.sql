-- delayq's PostgreSQL schema, version 2: the cold tier for far-future jobs.
--
-- A queue with a `cold_after_ms` (`delayq.cold_queues`) keeps a job due further ahead than
-- that in `delayq.cold`, not in the store; the mover (every relay) moves it into the store
-- once it is due within `cold_after_ms`. The table is partitioned by due time, a partition per
-- month (`delayq.cold_YYYYMM`, made on demand by `delayq.cold_partition`), so the mover reads
-- only the near partitions and an emptied month is dropped whole. A row holds the job as the
-- body of an HTTP enqueue (`body`, JSON text) beside its due time.
--
-- An id is unique per queue across partitions: every write of a job takes the transaction's
-- advisory lock of (queue, id) first (`delayq.cold_lock`), then looks it up.
-- `delayq.cold_counts` keeps each queue's count in 16 slots (writers add to a random one, so
-- concurrent enqueues do not queue on one row; a reader sums them).

CREATE TABLE delayq.cold_queues (
    queue         text PRIMARY KEY,
    cold_after_ms bigint NOT NULL CHECK (cold_after_ms > 0)
);

CREATE TABLE delayq.cold (
    queue       text NOT NULL,
    id          text NOT NULL,
    due_at      timestamptz NOT NULL,
    body        text NOT NULL,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, due_at, id)
) PARTITION BY RANGE (due_at);

CREATE INDEX cold_by_id ON delayq.cold (queue, id);

CREATE TABLE delayq.cold_counts (
    queue text NOT NULL,
    slot  smallint NOT NULL,
    n     bigint NOT NULL,
    PRIMARY KEY (queue, slot)
);

-- The partition of the month of `at`, made when missing (under an advisory lock: two
-- processes may ask at once).
CREATE FUNCTION delayq.cold_partition(at timestamptz) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    first timestamptz := date_trunc('month', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    name  text := 'cold_' || to_char(first AT TIME ZONE 'UTC', 'YYYYMM');
BEGIN
    IF to_regclass('delayq.' || name) IS NOT NULL THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('delayq.cold_partition'));
    IF to_regclass('delayq.' || name) IS NOT NULL THEN
        RETURN;
    END IF;
    EXECUTE format(
        'CREATE TABLE delayq.%I PARTITION OF delayq.cold FOR VALUES FROM (%L) TO (%L)',
        name, first, first + interval '1 month');
END
$fn$;

-- Serializes the writes of one job of the cold tier until the transaction ends.
CREATE FUNCTION delayq.cold_lock(queue text, id text) RETURNS void
LANGUAGE sql
AS $fn$
    SELECT pg_advisory_xact_lock(hashtextextended(queue || '/' || id, 48));
$fn$;
