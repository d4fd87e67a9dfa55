-- The embedded store: one table of jobs, one index that serves every ordered read, a table of
-- per-queue state (paused) and a counter table for lease (fencing) tokens.
PRAGMA journal_mode = WAL;
PRAGMA synchronous = FULL;

CREATE TABLE IF NOT EXISTS jobs (
  queue        TEXT    NOT NULL,
  id           TEXT    NOT NULL,
  state        INTEGER NOT NULL,          -- 0 scheduled, 1 leased, 2 dead
  score        INTEGER NOT NULL,          -- due ms | lease deadline ms | failed-at ms
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
  UNIQUE (queue, id)
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (queue, state, score, id);
-- Per-queue state every consumer obeys: paused (1) leases nothing.
CREATE TABLE IF NOT EXISTS queue_conf (queue TEXT PRIMARY KEY, paused INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (k, v) VALUES ('fence', 0), ('schema_version', 1);
