#!lua flags=allow-oom
-- extend.lua: moves a lease deadline to now + lease_ms.
-- KEYS[1] lease  ZSET id -> lease deadline ms
-- KEYS[2] jobs   HASH id -> record
-- KEYS[3] lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- KEYS[4] lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- KEYS[5+] (a queue with a lane only) the id's index bucket `ix:<b>`
-- ARGV[1] id, ARGV[2] token, ARGV[3] lease_ms
-- Returns { R_OK, new deadline ms } | { R_LOST } | { R_MISSING } (nothing changed).
-- Flag allow-oom: a full store (`maxmemory`, noeviction) still extends leases — the write
-- replaces a score and needs no memory, and refusing it would make long handlers lose their
-- jobs to other consumers.
-- Safe to run twice: it sets the deadline from now; a second run only moves it a little later.
-- The first extra key (an index bucket), after the declared ones.
local ix0 = 5
local lease, jobs = KEYS[1], KEYS[2]
local id = ARGV[1]
local raw, why = leased_raw(jobs, id, tonumber(ARGV[2]),
  KEYS[ix0] and { lane = KEYS[3], meta = KEYS[4], ix = KEYS[ix0] })
if not raw then
  return { why }
end
local deadline = now_ms() + tonumber(ARGV[3])
redis.call('ZADD', lease, deadline, id)
return { R_OK, deadline }
