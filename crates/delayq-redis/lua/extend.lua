-- extend.lua: moves a lease deadline to now + lease_ms.
-- KEYS[1] lease  ZSET id -> lease deadline ms
-- KEYS[2] jobs   HASH id -> record
-- ARGV[1] id, ARGV[2] token, ARGV[3] lease_ms
-- Returns the new deadline ms, or -1 when the lease is lost (nothing changed).
local lease, jobs = KEYS[1], KEYS[2]
local id = ARGV[1]
if not leased_raw(jobs, id, tonumber(ARGV[2])) then
  return -1
end
local deadline = now_ms() + tonumber(ARGV[3])
redis.call('ZADD', lease, deadline, id)
return deadline
