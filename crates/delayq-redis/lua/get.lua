-- get.lua: one job in any state (read only).
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] lease  ZSET id -> lease deadline ms
-- KEYS[3] jobs   HASH id -> record
-- KEYS[4] dead   ZSET id -> failed_at ms
-- KEYS[5] lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- KEYS[6] lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- KEYS[7+] (a queue with a lane only) the id's index bucket `ix:<b>`
-- ARGV[1] id
-- Returns false when missing, else { ST_* state code, lease deadline | failed_at | -1, record }
-- (a done job is told by its record: F_DONE; its completion time is in the record)
-- Safe to run twice: it writes nothing.
-- The first extra key (an index bucket), after the declared ones.
local ix0 = 7
local sched, lease, jobs, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id = ARGV[1]
local raw = redis.call('HGET', jobs, id)
if not raw then
  if not KEYS[ix0] then return false end
  local s, rec = lane_find({ lane = KEYS[5], meta = KEYS[6], ix = KEYS[ix0] }, id)
  if not s then return false end
  return { ST_SCHEDULED, -1, rec }
end
local d = redis.call('ZSCORE', lease, id)
if d then return { ST_LEASED, tonumber(d), raw } end
d = redis.call('ZSCORE', dead, id)
if d then return { ST_DEAD, tonumber(d), raw } end
if has(string.byte(raw, 2), F_DONE) then return { ST_DONE, -1, raw } end
return { ST_SCHEDULED, -1, raw }
