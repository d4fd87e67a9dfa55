-- reschedule.lua: moves a scheduled job to a new due time.
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] lease  ZSET id -> lease deadline ms
-- KEYS[3] jobs   HASH id -> record
-- KEYS[4] dead   ZSET id -> failed_at ms
-- KEYS[5] wake   channel of the queue's consumers
-- KEYS[6] ready  ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- KEYS[7] lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- KEYS[8] lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- KEYS[9] lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- KEYS[10+] (a queue with a lane only) the id's index bucket `ix:<b>`
-- ARGV[1] id, ARGV[2] mode ('n'|'d'|'a'), ARGV[3] t_ms
-- Returns { R_OK, due_ms } | { R_LEASED } | { R_DEAD } | { R_MISSING } (nothing changed)
-- A lane job moves to `sched` (lane.lua: lane_pull) with its new due time.
-- Safe to run twice: the second run sets the same due time (for a delay, one computed a
-- moment later).
-- The first extra key (an index bucket), after the declared ones.
local ix0 = 10
local sched, lease, jobs, dead, wake, ready = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local id = ARGV[1]
if KEYS[ix0] then
  lane_pull({ lane = KEYS[7], meta = KEYS[8], gone = KEYS[9], ix = KEYS[ix0] }, jobs, sched, id)
end
if not redis.call('ZSCORE', sched, id) then
  -- A due job of a queue with priorities waits in `ready`: it goes back to `sched`.
  if redis.call('ZREM', ready, id) == 0 then
    return { refusal(state_of(sched, lease, dead, id)) }
  end
end
local now = now_ms()
local due = due_from(ARGV[2], tonumber(ARGV[3]), now)
local r = decode(redis.call('HGET', jobs, id))
r.due = due
wake_if_earlier(sched, wake, due)
redis.call('HSET', jobs, id, encode(r))
redis.call('ZADD', sched, due, id)
return { R_OK, due }
