-- cancel.lua: removes a scheduled job; reports what it found otherwise.
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] lease  ZSET id -> lease deadline ms
-- KEYS[3] jobs   HASH id -> record
-- KEYS[4] dead   ZSET id -> failed_at ms
-- KEYS[5] ready  ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- KEYS[6] lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- KEYS[7] lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- KEYS[8] lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- KEYS[9+] (a queue with a lane only) the id's index bucket `ix:<b>`
-- ARGV[1] id
-- Returns R_OK (this call removed it) | R_LEASED | R_DEAD | R_MISSING (nothing changed).
-- A lane job's entry stays in the lane as a tombstone of its due time, its bit set in
-- lanegone, until a claim passes it.
-- Safe to run twice: the second run finds nothing and answers R_MISSING.
-- The first extra key (an index bucket), after the declared ones.
local ix0 = 9
local sched, lease, jobs, dead, ready = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
if redis.call('ZREM', sched, id) == 1 or redis.call('ZREM', ready, id) == 1 then
  redis.call('HDEL', jobs, id)
  return R_OK
end
if KEYS[ix0] then
  local L = { lane = KEYS[6], meta = KEYS[7], gone = KEYS[8], ix = KEYS[ix0] }
  if lane_drop(L, id) then return R_OK end
end
return refusal(state_of(sched, lease, dead, id, ready))
