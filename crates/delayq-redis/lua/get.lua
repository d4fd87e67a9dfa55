-- get.lua: one job in any state (read only).
-- Keys (declared in transitions/get.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- dead      ZSET id -> failed_at ms
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- waiting   ZSET id -> due_ms: jobs waiting for their dependencies
-- ix        (tail; a queue with a lane only) the id's index bucket `ix:<b>`
-- Arguments: id.
-- Returns false when missing, else found{ state, at, rec }: its ST_* state code, its lease
-- deadline or failed-at time (ms; -1 for the other states) and its record (a done job is told
-- by its record: F_DONE; its completion time is in the record).
-- Safe to run twice: it writes nothing.
local raw = redis.call('HGET', jobs, id)
if not raw then
  if ix_n == 0 then return false end
  local s, rec = lane_find({ lane = lane, meta = lanemeta, ix = KEYS[ix_at] }, id)
  if not s then return false end
  return found{ state = ST_SCHEDULED, at = -1, rec = rec }
end
local d = redis.call('ZSCORE', lease, id)
if d then return found{ state = ST_LEASED, at = tonumber(d), rec = raw } end
d = redis.call('ZSCORE', dead, id)
if d then return found{ state = ST_DEAD, at = tonumber(d), rec = raw } end
if has(string.byte(raw, 2), F_DONE) then return found{ state = ST_DONE, at = -1, rec = raw } end
if redis.call('ZSCORE', waiting, id) then return found{ state = ST_WAITING, at = -1, rec = raw } end
return found{ state = ST_SCHEDULED, at = -1, rec = raw }
