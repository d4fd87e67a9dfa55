#!lua flags=allow-oom
-- extend.lua: moves a lease deadline to now + lease_ms.
-- Keys (declared in transitions/extend.rs, which generates the locals):
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- cxl       ZSET `<token>:<id>` -> until when: leases cancelled while they ran (cancel.lua)
-- ix        (tail; a queue with a lane only) the id's index bucket `ix:<b>`
-- Arguments: id, token, lease_ms.
-- Returns coded{ code, value }: R_OK and the new deadline (ms), or R_LOST / R_CANCELLED
-- (cancelled while it ran) / R_MISSING (nothing changed).
-- Flag allow-oom: a full store (`maxmemory`, noeviction) still extends leases — the write
-- replaces a score and needs no memory, and refusing it would make long handlers lose their
-- jobs to other consumers.
-- Safe to run twice: it sets the deadline from now; a second run only moves it a little later.
local raw, why = leased_raw(jobs, id, token,
  ix_n > 0 and { lane = lane, meta = lanemeta, ix = KEYS[ix_at] }, cxl)
if not raw then
  return coded{ code = why, value = 0 }
end
local deadline = now_ms() + lease_ms
redis.call('ZADD', lease, deadline, id)
return coded{ code = R_OK, value = deadline }
