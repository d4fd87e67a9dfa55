-- The embedded store: one table of jobs, one index that serves every ordered read, a table of
-- per-queue state (paused) and a counter table for lease (fencing) tokens.
PRAGMA journal_mode = WAL;
PRAGMA synchronous = FULL;

CREATE TABLE IF NOT EXISTS jobs (
  queue        TEXT    NOT NULL,
  id           TEXT    NOT NULL,
  state        INTEGER NOT NULL,          -- 0 scheduled, 1 leased, 2 dead, 3 done (kept)
  score        INTEGER NOT NULL,          -- due | lease deadline | failed-at | retention end (ms)
  due          INTEGER NOT NULL,
  created      INTEGER NOT NULL,
  attempt      INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  backoff_kind INTEGER,
  backoff_base INTEGER,
  backoff_cap  INTEGER,
  lease_ms     INTEGER,
  token        INTEGER NOT NULL DEFAULT 0, -- non-zero exactly while leased
  last_error   TEXT,
  payload      BLOB    NOT NULL,
  timeout_ms   INTEGER,                   -- longest one attempt may run (store.rs adds these
  expires_at   INTEGER,                   -- columns to stores made before they existed)
  priority     INTEGER,                   -- 0-9, NULL: the default
  keep_done_ms INTEGER,                   -- the job's own retention (NULL: the queue's)
  dedupe_ms    INTEGER,
  completed_at INTEGER,                   -- state 3 (done, kept): when it completed, and
  dedupe_until INTEGER,                   -- until when its id is refused
  target       TEXT,                      -- HTTP push target (delayq::Target as JSON)
  trace        TEXT,                      -- W3C trace context (delayq::TraceContext::to_bytes)
  result       BLOB,                      -- state 3: the handler's result (delayq::Completion)
  key          TEXT,                      -- its key (delayq::JobKey; '' in a keyed queue:
                                          -- none; index jobs_by_key, made in store.rs)
  batch        TEXT,                      -- its batch until it ends (batches.rs)
  UNIQUE (queue, id)
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (queue, state, score, id);
-- Per-queue state every consumer obeys: paused (1) leases nothing; prio (1): the queue has had
-- jobs with a priority, so claims order due jobs by priority (store.rs adds the column to
-- stores made before it).
-- keyed (1): the queue has had jobs with a key, so claims share its due jobs among keys
-- (keyed.rs); turn: the highest turn claimed.
CREATE TABLE IF NOT EXISTS queue_conf (
  queue  TEXT PRIMARY KEY,
  paused INTEGER NOT NULL DEFAULT 0,
  prio   INTEGER NOT NULL DEFAULT 0,
  keyed  INTEGER NOT NULL DEFAULT 0,
  turn   INTEGER NOT NULL DEFAULT 0
);
-- The keys of a keyed queue (keyed.rs; '' holds its jobs without a key): each key's last turn,
-- the end of its hold (NULL: none) and its token bucket (key_rate).
CREATE TABLE IF NOT EXISTS job_keys (
  queue      TEXT    NOT NULL,
  key        TEXT    NOT NULL,
  turn       INTEGER NOT NULL DEFAULT 0,
  hold_until INTEGER,
  tokens     REAL,
  at_us      INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (queue, key)
);
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (k, v) VALUES ('fence', 0), ('schema_version', 1);
-- Per-queue rate and concurrency limits and retention (delayq::QueueSettings): the settings,
-- the token bucket (tokens, counted at at_us) and `waiting` (a claim was held back by max_in_flight: the
-- next freed slot wakes consumers). A queue without limits or retention has no row.
CREATE TABLE IF NOT EXISTS queue_limits (
  queue         TEXT PRIMARY KEY,
  per_s         REAL,
  burst         INTEGER NOT NULL DEFAULT 0,
  max_in_flight INTEGER,
  tokens        REAL    NOT NULL DEFAULT 0,
  at_us         INTEGER NOT NULL DEFAULT 0,
  waiting       INTEGER NOT NULL DEFAULT 0,
  keep_done_ms  INTEGER NOT NULL DEFAULT 0,
  dedupe_ms     INTEGER NOT NULL DEFAULT 0,
  key_mif       INTEGER,                  -- key_max_in_flight
  key_per_s     REAL,                     -- key_rate
  key_burst     INTEGER NOT NULL DEFAULT 0,
  pause_key_on_429 INTEGER NOT NULL DEFAULT 0
);
-- Schedules (delayq::periodic): the definition as JSON and the next fire; a fire updates
-- next_ms only while it is the one the ticker read, in the transaction that inserts its jobs.
CREATE TABLE IF NOT EXISTS schedules (
  queue   TEXT    NOT NULL,
  name    TEXT    NOT NULL,
  spec    TEXT    NOT NULL,
  next_ms INTEGER NOT NULL,
  PRIMARY KEY (queue, name)
);
-- Queues' delivery settings (delayq::DeliveryMode): `delivery` 'push' or 'pull' (rows written
-- before the setting existed get theirs when the store is opened: store.rs, `migrate`),
-- `target` the default push target (JSON; NULL: none). A queue without a row is pull.
CREATE TABLE IF NOT EXISTS push_queues (
  queue    TEXT PRIMARY KEY,
  target   TEXT,
  delivery TEXT
);
-- Batches (delayq::batch; batches.rs): state 0 open, 1 closed, 2 done (callbacks enqueued);
-- spec the callbacks (delayq::BatchSpec as JSON); results (1): keep the jobs' results in
-- batch_results for the callbacks; the counts of its jobs.
CREATE TABLE IF NOT EXISTS batches (
  queue     TEXT    NOT NULL,
  id        TEXT    NOT NULL,
  state     INTEGER NOT NULL,
  spec      TEXT    NOT NULL,
  created   INTEGER NOT NULL,
  done_at   INTEGER,
  results   INTEGER NOT NULL DEFAULT 0,
  pending   INTEGER NOT NULL DEFAULT 0,
  succeeded INTEGER NOT NULL DEFAULT 0,
  dead      INTEGER NOT NULL DEFAULT 0,
  cancelled INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (queue, id)
);
CREATE TABLE IF NOT EXISTS batch_results (
  queue  TEXT NOT NULL,
  batch  TEXT NOT NULL,
  job    TEXT NOT NULL,
  result BLOB NOT NULL,
  PRIMARY KEY (queue, batch, job)
);
-- Leases of jobs cancelled while they ran (`DELETE …?running=true`): their extend, ack and
-- nack answer `cancelled` until `until` (an hour past the lease's deadline; a cancel of a
-- running job forgets the older ones). Tokens are never reused, so a row names one lease.
CREATE TABLE IF NOT EXISTS cancelled_leases (
  queue TEXT    NOT NULL,
  id    TEXT    NOT NULL,
  token INTEGER NOT NULL,
  until INTEGER NOT NULL,
  PRIMARY KEY (queue, id, token)
);
-- Jobs that wait for other jobs (deps.rs): a dependent's policy and whether its claim carries
-- its dependencies' results; each of its dependencies with how it stands (p pending, o done,
-- d dead, c cancelled) and, for one that asked, the dependency's result. A dependent is a job
-- in state 4 (waiting) until none is pending; its rows go when it does.
CREATE TABLE IF NOT EXISTS dependents (
  queue      TEXT    NOT NULL,
  id         TEXT    NOT NULL,
  on_failure INTEGER NOT NULL,
  results    INTEGER NOT NULL,
  PRIMARY KEY (queue, id)
);
CREATE TABLE IF NOT EXISTS job_deps (
  queue     TEXT NOT NULL,
  id        TEXT NOT NULL,
  dep_queue TEXT NOT NULL,
  dep_id    TEXT NOT NULL,
  outcome   TEXT NOT NULL,
  result    BLOB,
  PRIMARY KEY (queue, id, dep_queue, dep_id)
);
CREATE INDEX IF NOT EXISTS job_deps_by_dep ON job_deps (dep_queue, dep_id);
