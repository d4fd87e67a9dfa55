-- nack.lua: fails one attempt of a leased job: retry later, or dead-letter.
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] lease  ZSET id -> lease deadline ms
-- KEYS[3] jobs   HASH id -> record
-- KEYS[4] dead   ZSET id -> failed_at ms
-- KEYS[5] wake   channel of the queue's consumers
-- KEYS[6] stat   STRING paused flag and series of counts (common.lua: count)
-- KEYS[7] lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- KEYS[8] lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- KEYS[9+] (a queue with a lane only) the id's index bucket `ix:<b>`
-- ARGV[1] id, ARGV[2] token, ARGV[3] error message (cut on a character boundary by the
-- caller), ARGV[4] retry delay ms (-1: the job's backoff), ARGV[5] 1 = dead-letter now,
-- ARGV[6] uniform random number in [0, 1) for jitter
-- Returns { R_RETRY, due_ms } | { R_BURIED, failed_at_ms } | { R_LOST } | { R_MISSING }
-- Safe to run twice: the first run clears the lease token, so a second finds no lease and
-- answers R_LOST, changing nothing.
-- The first extra key (an index bucket), after the declared ones.
local ix0 = 9
local sched, lease, jobs, dead, wake, stat = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local id = ARGV[1]
local raw, why = leased_raw(jobs, id, tonumber(ARGV[2]),
  KEYS[ix0] and { lane = KEYS[7], meta = KEYS[8], ix = KEYS[ix0] })
if not raw then
  return { why }
end
local r = decode(raw)
local now = now_ms()
redis.call('ZREM', lease, id)
limit_freed(stat, wake)
r.err = ARGV[3]
if ARGV[5] == '1' or r.attempt >= r.max_attempts then
  bury(jobs, dead, id, r, now)
  count(stat, now, 3, 1)
  return { R_BURIED, now }
end
local delay = tonumber(ARGV[4])
if delay < 0 then
  delay = backoff_ms(r, r.attempt, tonumber(ARGV[6]))
end
r.token = 0
r.due = now + delay
wake_if_earlier(sched, wake, r.due)
redis.call('HSET', jobs, id, encode(r))
redis.call('ZADD', sched, r.due, id)
count(stat, now, 2, 1)
return { R_RETRY, r.due }
