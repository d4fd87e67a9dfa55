-- dep_wait.lua: enqueues one job that waits for other jobs (deps.lua, at the top): it is
-- written waiting, with every dependency pending, and noted as being registered.
-- Keys (declared in transitions/dep_wait.rs, which generates the locals):
-- jobs      HASH id -> record
-- waiting   ZSET id -> due_ms: jobs waiting for their dependencies
-- stat      STRING flags (L_KEYS, L_PRIO for a job with a key or a priority) and series
-- done      ZSET id -> when its retention ends: completed jobs kept as done
-- dreg      ZSET id -> ms: dependents whose waiters are not all registered yet (the backend
--           registers them at once; a sweep finishes what a crash left)
-- Arguments: id, spec (as enqueue.lua's: a flags byte, then the record with X_DEPS), then
-- the tail `deps` of field (`<queue>\0<id>` of each dependency).
-- Returns coded{ code, value }: R_OK (created) | R_EXISTS | R_DONE (kept as done within its
-- dedupe window), and the job's due time (ms).
-- Safe to run twice: a second run finds the job and answers R_EXISTS, writing nothing.
local now = now_ms()
local mode = string.byte(spec, 1)
local due = due_from(mode, struct.unpack('>I6', spec, 1 + AT_DUE), now)
local stored = redis.call('HGET', jobs, id)
if stored then
  if has(string.byte(stored, 2), F_DONE) and decode(stored).dedupe_until <= now then
    -- Done, its dedupe window over: the id is free again.
    redis.call('ZREM', done, id)
  else
    local code = has(string.byte(stored, 2), F_DONE) and R_DONE or R_EXISTS
    return coded{ code = code, value = rec_due(stored) }
  end
end
local rec = string.sub(spec, 2, AT_DUE) .. struct.pack('>I6I6', due, now)
  .. string.sub(spec, 1 + AT_TOKEN)
redis.call('HSET', jobs, id, rec)
redis.call('ZADD', waiting, due, id)
local g = { '\0n', deps_n }
for i = 1, deps_n do
  g[#g + 1] = deps_field[i]
  g[#g + 1] = 'p'
end
call_chunked('HSET', dep_prefix(jobs) .. 'dg:' .. id, g)
redis.call('ZADD', dreg, now, id)
-- A key or a priority marks the queue as an enqueue does (keyed.lua; common.lua: promote),
-- and a keyed job is in its key's index (keyed.lua, above key_index_add).
local k, prio = rec_kp(rec)
local f = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
local add = 0
if k ~= '' then
  redis.call('ZADD', dep_prefix(jobs) .. 'kj:' .. k, 0, id)
  if bit.band(f, L_KEYS) == 0 then add = add + L_KEYS end
end
if prio ~= DEFAULT_PRIORITY and bit.band(f, L_PRIO) == 0 then add = add + L_PRIO end
if add > 0 then redis.call('BITFIELD', stat, 'SET', 'u8', S_FLAGS * 8, f + add) end
count(stat, now, 0, 1)
return coded{ code = R_OK, value = due }
