-- enqueue.lua: adds jobs that do not exist yet; reports existing ids without touching them.
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] jobs   HASH id -> record
-- KEYS[3] wake   channel of the queue's consumers
-- ARGV[1] number of jobs n; then 9 per job:
--   id, mode ('n'|'d'|'a'), t_ms, max_attempts, backoff kind (-1 = default), base_ms, cap_ms,
--   lease_ms (0 = consumer's), payload
-- Returns a flat array: created (1|0), due_ms for each job in order.
local sched, jobs, wake = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
local n = tonumber(ARGV[1])
local out = {}
local earliest = nil
local zadd = {}
local hset = {}
local fresh = {}
for i = 0, n - 1 do
  local a = 2 + i * 9
  local id = ARGV[a]
  local existing = fresh[id] or redis.call('HGET', jobs, id)
  if existing then
    local due = fresh[id] and tonumber(fresh[id]) or decode(existing).due
    out[#out + 1] = 0
    out[#out + 1] = due
  else
    local due = due_from(ARGV[a + 1], tonumber(ARGV[a + 2]), now)
    local r = { attempt = 0, max_attempts = tonumber(ARGV[a + 3]), due = due, created = now,
      payload = ARGV[a + 8] }
    local kind = tonumber(ARGV[a + 4])
    if kind >= 0 then
      r.bkind, r.bbase, r.bcap = kind, tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])
    end
    local lease = tonumber(ARGV[a + 7])
    if lease > 0 then r.lease = lease end
    hset[#hset + 1] = id
    hset[#hset + 1] = encode(r)
    zadd[#zadd + 1] = due
    zadd[#zadd + 1] = id
    fresh[id] = tostring(due)
    if earliest == nil or due < earliest then earliest = due end
    out[#out + 1] = 1
    out[#out + 1] = due
  end
end
if earliest ~= nil then
  wake_if_earlier(sched, wake, earliest)
  call_chunked('HSET', jobs, hset)
  call_chunked('ZADD', sched, zadd)
end
return out
