-- key_bulk.lua: every waiting job of a key in this shard at once, through the key index
-- (keyed.lua, above key_index_add): cancelled (with `running` its leased jobs too, each ended
-- as cancel.lua ends one) or moved to new due times.
-- Keys (declared in transitions/key_bulk.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- dead      ZSET id -> failed_at ms
-- jobs      HASH id -> record
-- ready     ZSET a keyed queue's due jobs in turns (keyed.lua)
-- stat      STRING the flags (L_KEYS, L_BATCH, L_WAITING)
-- wake      channel of the queue's consumers (an earlier due time; a freed slot)
-- lane      LIST the one-delay lane (lane.lua, above lane_entry; key_indexed only)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- kinfl     HASH key -> its jobs leased (keyed.lua: key_free; `running` only)
-- kwait     ZSET key -> when a parked job comes back (keyed.lua; `running` only)
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard: a job that ends is
--           counted there (batch.lua)
-- cxl       ZSET `<token>:<id>` -> until when (ms) a lease cancelled while it ran answers
--           `cancelled` (cancel.lua)
-- kj        STRING: the index is whole; `kj:<key>` ZSET (all scores 0) the key's jobs
-- Arguments: key, op (KEY_CANCEL | KEY_CANCEL_RUNNING | KEY_MOVE), shift (KEY_MOVE: true,
-- each job by `t` ms from its due time, never before now unless it was due already; false:
-- all to `t`), t (ms).
-- Returns key_bulk{ n, running }: jobs cancelled or moved, and of the cancelled ones those
-- that were running. Scheduled and due jobs (parked ones too) are cancelled or moved; leased
-- ones only cancelled with KEY_CANCEL_RUNNING; dead and done jobs stay. A moved job goes to
-- `sched` at its new time (a due one leaves `ready`: it gets a new turn when it is due again).
-- Safe to run twice: a second cancel finds the jobs gone (their members left the index) and
-- answers 0; a second move with `shift` moves the jobs again by `t` — the caller asked for one
-- move and sends it once (an absolute move is the same twice).
key_indexed({ kj = kj, stat = stat, lane = lane, lanemeta = lanemeta, lanegone = lanegone,
  jobs = jobs, sched = sched, ready = ready, lease = lease, dead = dead })
local ixk = kj .. ':' .. key
local ids = redis.call('ZRANGE', ixk, 0, -1)
if #ids == 0 then return key_bulk{ n = 0, running = 0 } end
local now = now_ms()
local lflags = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
local batched = bit.band(lflags, L_BATCH) ~= 0
if batched then
  --@ define batch_end batch_count
end
local bacc = {}
local gone, done_n, running_n = {}, 0, 0
-- KEY_MOVE: the new due times (ZADD's pairs) and the earliest.
local zadd, earliest = {}, nil
-- Leases ended (KEY_CANCEL_RUNNING): their keys' slots and the `cxl` entries.
local ended, cxl_add = {}, {}
for c = 1, #ids, 1000 do
  local part = { unpack(ids, c, math.min(c + 999, #ids)) }
  local raws = redis.call('HMGET', jobs, unpack(part))
  for i = 1, #part do
    local id, raw = part[i], raws[i]
    if not key_member(raw, key) then
      gone[#gone + 1] = id
    elseif op == KEY_MOVE then
      if redis.call('ZSCORE', sched, id) or redis.call('ZREM', ready, id) == 1 then
        local due = rec_due(raw)
        local to = t
        if shift then
          to = due + t
          if to < now then to = math.min(now, due) end
        end
        local r = decode(raw)
        r.due = to
        redis.call('HSET', jobs, id, encode(r))
        zadd[#zadd + 1] = to
        zadd[#zadd + 1] = id
        if not earliest or to < earliest then earliest = to end
        done_n = done_n + 1
      end
    elseif redis.call('ZREM', sched, id) == 1 or redis.call('ZREM', ready, id) == 1 then
      redis.call('HDEL', jobs, id)
      if batched then batch_end(bacc, raw, id, 'c') end
      gone[#gone + 1] = id
      done_n = done_n + 1
    elseif op == KEY_CANCEL_RUNNING then
      local deadline = redis.call('ZSCORE', lease, id)
      if deadline then
        redis.call('ZREM', lease, id)
        redis.call('HDEL', jobs, id)
        if batched then batch_end(bacc, raw, id, 'c') end
        ended[key] = (ended[key] or 0) + 1
        cxl_add[#cxl_add + 1] = tonumber(deadline) + CANCELLED_KEPT_MS
        cxl_add[#cxl_add + 1] = string.format('%d', rec_token(raw)) .. ':' .. id
        gone[#gone + 1] = id
        done_n = done_n + 1
        running_n = running_n + 1
      end
    end
  end
end
if #gone > 0 then call_chunked('ZREM', ixk, gone) end
if earliest then
  wake_if_earlier(sched, wake, earliest)
  call_chunked('ZADD', sched, zadd)
end
if batched then batch_count(bm, bacc, now) end
if running_n > 0 then
  --@ define key_free
  if key_free(kinfl, kwait, ready, ended) then redis.call(PUBLISH, wake, 0) end
  limit_freed(stat, wake, lflags)
  local old = redis.call('ZRANGEBYSCORE', cxl, '-inf', now, 'LIMIT', 0, 100)
  if #old > 0 then redis.call('ZREM', cxl, unpack(old)) end
  call_chunked('ZADD', cxl, cxl_add)
end
return key_bulk{ n = done_n, running = running_n }
