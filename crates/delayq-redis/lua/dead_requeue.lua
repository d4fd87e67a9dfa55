-- dead_requeue.lua: puts dead jobs back, due now, with attempts and error reset.
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] lease  ZSET id -> lease deadline ms
-- KEYS[3] dead   ZSET id -> failed_at ms
-- KEYS[4] jobs   HASH id -> record
-- KEYS[5] wake   channel of the queue's consumers
-- KEYS[6] ready  ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- KEYS[7] lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- KEYS[8] lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- KEYS[9+] (a queue with a lane, 'one' only) the id's index bucket `ix:<b>`
-- ARGV[1] 'one' with ARGV[2] id, or 'all' with ARGV[2] most jobs in this call
-- Returns for 'one': R_OK | R_SCHEDULED | R_LEASED | R_MISSING (nothing changed);
-- for 'all': the number requeued.
-- Safe to run twice: a requeued job is no longer dead, so a second 'one' answers
-- R_SCHEDULED (or R_LEASED) and a second 'all' requeues only jobs that died meanwhile.
-- The first extra key (an index bucket), after the declared ones.
local ix0 = 9
local sched, lease, dead, jobs, wake, ready = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local ids
if ARGV[1] == 'one' then
  ids = { ARGV[2] }
  if not redis.call('ZSCORE', dead, ARGV[2]) then
    return refusal(state_of(sched, lease, dead, ARGV[2], ready, KEYS[ix0] and { lane = KEYS[7], meta = KEYS[8], ix = KEYS[ix0] }))
  end
else
  ids = redis.call('ZRANGE', dead, 0, tonumber(ARGV[2]) - 1)
end
if #ids == 0 then return 0 end
local now = now_ms()
wake_if_earlier(sched, wake, now)
for _, id in ipairs(ids) do
  redis.call('ZREM', dead, id)
  local raw = redis.call('HGET', jobs, id)
  if raw then
    local r = decode(raw)
    r.attempt = 0
    r.err = nil
    r.due = now
    redis.call('HSET', jobs, id, encode(r))
    redis.call('ZADD', sched, now, id)
  end
end
if ARGV[1] == 'one' then return R_OK end
return #ids
