-- batch_join.lua: enqueues jobs into one shard as jobs of a batch: each job it creates joins
-- the batch (its id pending in `bm:<batch>`), unless the batch is closed in this shard.
-- Keys (declared in transitions/batch_join.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- jobs      HASH id -> record
-- wake      channel of the queue's consumers
-- stat      STRING flags (L_BATCH, and L_PRIO / L_KEYS for jobs with a priority or a key) and
--           series of counts (common.lua: count)
-- done      ZSET id -> when its retention ends: completed jobs kept as done
-- bm        prefix of `bm:<batch>`, the batch's jobs of this shard (batch.lua)
-- kj        STRING the key index is whole; `kj:<key>` ZSET each key's jobs (keyed.lua, above
--           key_index_add): a keyed job written is added there
-- Arguments: batch (its id), results (the batch keeps its jobs' results), then the tail
-- `jobs` of (id, spec) as enqueue.lua's (the record carries X_BATCH).
-- Returns per job (code, due_ms) (push_enqueued): R_OK (created: it joined) | R_EXISTS (the id
-- exists: nothing written, it did not join) | R_DONE (done and kept within its dedupe window:
-- the same) | R_CLOSED (the batch is closed: nothing written).
-- Jobs of a batch go to `sched` (never the lane); a replace is not offered.
-- Safe to run twice: a second run finds every job of the first and answers R_EXISTS (a job
-- joins once: only an id `bm:<batch>` does not hold yet is written there).
local now = now_ms()
local k = bm .. ':' .. batch
local out = {}
if redis.call('HGET', k, '\0x') then
  for _ = 1, jobs_n do push_enqueued(out, R_CLOSED, 0) end
  return out
end
if results then redis.call('HSET', k, '\0R', 1) end
local created, earliest, prio, keyed = 0, nil, false, false
local zadd, new, joined, fresh, kadd = {}, {}, {}, {}, {}
for c = 1, jobs_n, 1000 do
  local last = math.min(c + 999, jobs_n)
  local stored_all = redis.call('HMGET', jobs, unpack(jobs_id, c, last))
  local known = redis.call('HMGET', k, unpack(jobs_id, c, last))
  for i = c, last do
    local id, spec = jobs_id[i], jobs_spec[i]
    local due = due_from(string.byte(spec, 1), struct.unpack('>I6', spec, 1 + AT_DUE), now)
    local stored = stored_all[i - c + 1]
    if fresh[id] then
      -- An id twice in one call: the first is written.
      push_enqueued(out, R_EXISTS, fresh[id])
    else
      if stored and has(string.byte(stored, 2), F_DONE) and decode(stored).dedupe_until <= now then
        -- Done, its dedupe window over: the id is free again.
        redis.call('ZREM', done, id)
        stored = nil
      end
      if stored then
        local code = has(string.byte(stored, 2), F_DONE) and R_DONE or R_EXISTS
        push_enqueued(out, code, rec_due(stored))
      else
        local rec = string.sub(spec, 2, AT_DUE) .. struct.pack('>I6I6', due, now)
          .. string.sub(spec, 1 + AT_TOKEN)
        new[#new + 1] = id
        new[#new + 1] = rec
        zadd[#zadd + 1] = due
        zadd[#zadd + 1] = id
        fresh[id] = due
        created = created + 1
        if earliest == nil or due < earliest then earliest = due end
        -- It joins unless its id already ended in this batch (it then runs outside it).
        if not known[i - c + 1] then
          joined[#joined + 1] = id
          joined[#joined + 1] = 'p'
        end
        -- (A job at the default priority leaves the queue's claim order as it is.)
        local key, p = rec_kp(rec)
        if key ~= '' then
          keyed = true
          key_index_add(kadd, key, id)
        end
        if p ~= DEFAULT_PRIORITY then prio = true end
        push_enqueued(out, R_OK, due)
      end
    end
  end
end
if #new > 0 then call_chunked('HSET', jobs, new) end
if #joined > 0 then
  call_chunked('HSET', k, joined)
  redis.call('HINCRBY', k, '\0p', #joined / 2)
end
local f = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
local add = 0
if bit.band(f, L_BATCH) == 0 then add = add + L_BATCH end
if prio and bit.band(f, L_PRIO) == 0 then add = add + L_PRIO end
if keyed and bit.band(f, L_KEYS) == 0 then
  -- The shard's first keyed job: its key index is whole from the start — unless the queue
  -- has a lane, which may hold keyed jobs of an earlier build (lane.lua: key_indexed).
  add = add + L_KEYS
  if bit.band(f, L_LANE) == 0 then redis.call('SET', kj, '1') end
end
if add > 0 then redis.call('BITFIELD', stat, 'SET', 'u8', S_FLAGS * 8, f + add) end
if keyed then key_index_write(kj, kadd) end
if earliest ~= nil then
  wake_if_earlier(sched, wake, earliest)
  call_chunked('ZADD', sched, zadd)
end
if created > 0 then count(stat, now, 0, created) end
return out
