-- delayq's PostgreSQL schema, version 1: enqueue inside the application's transaction.
--
-- `delayq.enqueue(queue, id, payload, due_at, options)` writes a row of `delayq.outbox` in the
-- caller's transaction and notifies channel `delayq_outbox` (PostgreSQL delivers a notification
-- only when its transaction commits, once per transaction). Every running `delayq serve` /
-- `delayq worker` given `--postgres` relays committed rows into the store — LISTEN wakes it,
-- a periodic sweep catches what a lost notification missed — each batch in one transaction
-- (`FOR UPDATE SKIP LOCKED`, so relays share the work without a leader): the rows are enqueued
-- by id, then deleted. A row the store refuses (a bad option value, a push target on a pull
-- queue) moves to `delayq.rejected` with the reason instead of blocking the rows behind it.
--
-- The function checks what it can in the caller's transaction, so most mistakes fail the
-- application's own statement: the queue name, the id, the options object and its keys (the
-- enqueue fields of the HTTP API but those given as arguments). It is SECURITY DEFINER: the
-- application's role needs only `GRANT USAGE ON SCHEMA delayq` and `GRANT EXECUTE ON FUNCTION
-- delayq.enqueue(text, text, jsonb, timestamptz, jsonb)`, never the tables.

CREATE TABLE delayq.outbox (
    seq         bigserial PRIMARY KEY,
    queue       text NOT NULL,
    id          text NOT NULL,
    payload     jsonb,
    due_at      timestamptz NOT NULL,
    options     jsonb NOT NULL DEFAULT '{}',
    enqueued_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE delayq.rejected (
    seq         bigint PRIMARY KEY,
    queue       text NOT NULL,
    id          text NOT NULL,
    payload     jsonb,
    due_at      timestamptz NOT NULL,
    options     jsonb NOT NULL,
    enqueued_at timestamptz NOT NULL,
    rejected_at timestamptz NOT NULL DEFAULT now(),
    error       text NOT NULL
);

CREATE FUNCTION delayq.enqueue(
    queue   text,
    id      text,
    payload jsonb,
    due_at  timestamptz DEFAULT now(),
    options jsonb DEFAULT '{}'
) RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    opts jsonb := coalesce(enqueue.options, '{}'::jsonb);
    k text;
BEGIN
    IF enqueue.queue IS NULL OR enqueue.queue !~ '^[A-Za-z0-9._-]{1,128}$'
       OR enqueue.queue IN ('.', '..') THEN
        RAISE EXCEPTION 'delayq.enqueue: queue % is not 1-128 characters of [A-Za-z0-9._-]',
            quote_nullable(enqueue.queue)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue.id IS NULL OR octet_length(enqueue.id) NOT BETWEEN 1 AND 256
       OR enqueue.id ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'delayq.enqueue: id % is not 1-256 bytes without control characters',
            quote_nullable(enqueue.id)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF enqueue.due_at IS NULL THEN
        RAISE EXCEPTION 'delayq.enqueue: due_at is null (omit it for now)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(opts) <> 'object' THEN
        RAISE EXCEPTION 'delayq.enqueue: options must be a JSON object, not %', jsonb_typeof(opts)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR k IN SELECT jsonb_object_keys(opts) LOOP
        IF k IN ('id', 'payload', 'payload_b64', 'delay_ms', 'run_at') THEN
            RAISE EXCEPTION 'delayq.enqueue: option % is an argument of delayq.enqueue', k
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT k = ANY (ARRAY[
            'expires_at', 'expire_after_ms', 'on_conflict', 'priority', 'keep_done_ms',
            'dedupe_ms', 'key', 'depends_on', 'on_dependency_failure',
            'include_dependency_results', 'max_attempts', 'backoff', 'lease_ms', 'timeout_ms',
            'target', 'traceparent', 'tracestate'
        ]) THEN
            RAISE EXCEPTION 'delayq.enqueue: unknown option %', k
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'options takes the enqueue fields of docs/API.md';
        END IF;
    END LOOP;
    INSERT INTO delayq.outbox (queue, id, payload, due_at, options)
    VALUES (enqueue.queue, enqueue.id, enqueue.payload, enqueue.due_at, opts);
    PERFORM pg_notify('delayq_outbox', '');
END
$fn$;

REVOKE ALL ON FUNCTION delayq.enqueue(text, text, jsonb, timestamptz, jsonb) FROM PUBLIC;
