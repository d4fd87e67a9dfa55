-- dead_purge.lua: deletes dead jobs: one by id, or the oldest failures first.
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] lease  ZSET id -> lease deadline ms
-- KEYS[3] dead   ZSET id -> failed_at ms
-- KEYS[4] jobs   HASH id -> record
-- KEYS[5] ready  ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- KEYS[6] lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- KEYS[7] lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- KEYS[8+] (a queue with a lane, 'one' only) the id's index bucket `ix:<b>`
-- ARGV[1] 'one' with ARGV[2] id, or 'all' with ARGV[2] most jobs in this call
-- Returns for 'one': R_OK | R_SCHEDULED | R_LEASED | R_MISSING (nothing changed);
-- for 'all': the number deleted.
-- Safe to run twice: a second 'one' finds nothing and answers R_MISSING; a second 'all'
-- deletes only jobs that died meanwhile (the caller asked for all of them to go).
-- The first extra key (an index bucket), after the declared ones.
local ix0 = 8
local sched, lease, dead, jobs, ready = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
if ARGV[1] == 'one' then
  local id = ARGV[2]
  if redis.call('ZREM', dead, id) == 0 then
    return refusal(state_of(sched, lease, dead, id, ready, KEYS[ix0] and { lane = KEYS[6], meta = KEYS[7], ix = KEYS[ix0] }))
  end
  redis.call('HDEL', jobs, id)
  return R_OK
end
local ids = redis.call('ZRANGE', dead, 0, tonumber(ARGV[2]) - 1)
if #ids == 0 then return 0 end
call_chunked('HDEL', jobs, ids)
call_chunked('ZREM', dead, ids)
return #ids
