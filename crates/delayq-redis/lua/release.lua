-- release.lua: gives leases back; the jobs are due again at once.
-- Keys (declared in transitions/release.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- wake      channel of the queue's consumers
-- stat      STRING limit flags (a full max_in_flight is woken when slots free)
-- ready     ZSET a keyed queue's due jobs in turns (keyed.lua; only with L_KEYS)
-- kinfl     HASH key -> its jobs leased (keyed.lua: key_free)
-- kwait     ZSET key -> when a parked job comes back; `kwait:<key>` its parked jobs
-- Arguments: undo (the attempts never started: each is given back), then the tail `leases` of
-- (id, token).
-- Returns the number of leases released (stale tokens are skipped).
-- Safe to run twice: released records have no token, so a second run skips them all.
local now = now_ms()
local n = 0
local lflags = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
local keyed = bit.band(lflags, L_KEYS) ~= 0
-- A keyed queue's helpers are defined only when it is one (scripts.rs: DEFINE).
if keyed then
  --@ define key_ended key_free
end
local ended = {}
for i = 1, leases_n do
  local id = leases_id[i]
  local raw = leased_raw(jobs, id, leases_token[i])
  if raw then
    if keyed then key_ended(ended, raw) end
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
if keyed then key_free(kinfl, kwait, ready, ended) end
if n > 0 then limit_freed(stat, wake, lflags) end
return n
