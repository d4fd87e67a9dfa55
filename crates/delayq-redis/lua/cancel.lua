-- cancel.lua: removes a scheduled job; reports what it found otherwise.
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] lease  ZSET id -> lease deadline ms
-- KEYS[3] jobs   HASH id -> record
-- KEYS[4] dead   ZSET id -> failed_at ms
-- KEYS[5] ready  ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- ARGV[1] id
-- Returns R_OK (this call removed it) | R_LEASED | R_DEAD | R_MISSING (nothing changed).
-- Safe to run twice: the second run finds nothing and answers R_MISSING.
local sched, lease, jobs, dead, ready = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
if redis.call('ZREM', sched, id) == 1 or redis.call('ZREM', ready, id) == 1 then
  redis.call('HDEL', jobs, id)
  return R_OK
end
return refusal(state_of(sched, lease, dead, id, ready))
