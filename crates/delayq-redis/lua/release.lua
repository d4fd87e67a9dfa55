-- release.lua: gives leases back; the jobs are due again at once.
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] lease  ZSET id -> lease deadline ms
-- KEYS[3] jobs   HASH id -> record
-- KEYS[4] wake   channel of the queue's consumers
-- KEYS[5] stat   STRING limit flags (a full max_in_flight is woken when slots free)
-- ARGV[1] 1 = undo the attempt (the job never started); then pairs id, token
-- Returns the number of leases released (stale tokens are skipped).
-- Safe to run twice: released records have no token, so a second run skips them all.
local sched, lease, jobs, wake, stat = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local undo = ARGV[1] == '1'
local now = now_ms()
local n = 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local raw = leased_raw(jobs, id, tonumber(ARGV[i + 1]))
  if raw then
    local r = decode(raw)
    if n == 0 then wake_if_earlier(sched, wake, now) end
    redis.call('ZREM', lease, id)
    r.token = 0
    if undo and r.attempt > 0 then r.attempt = r.attempt - 1 end
    if r.due > now then r.due = now end
    redis.call('HSET', jobs, id, encode(r))
    redis.call('ZADD', sched, r.due, id)
    n = n + 1
  end
end
if n > 0 then limit_freed(stat, wake) end
return n
