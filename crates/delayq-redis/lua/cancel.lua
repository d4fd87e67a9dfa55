-- cancel.lua: removes a scheduled job — and with `running` a leased one, ended cancelled at
-- once; reports what it found otherwise.
-- Keys (declared in transitions/cancel.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- dead      ZSET id -> failed_at ms
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard (batch.lua): a job that ends is counted there
-- stat      STRING paused flag, limits and series (common.lua; `running` only: the flags)
-- wake      channel of the queue's consumers (`running` only: a freed max_in_flight or key slot)
-- kinfl     HASH key -> its jobs leased (keyed.lua: key_free; `running` only)
-- kwait     ZSET key -> when a parked job comes back (keyed.lua; `running` only)
-- cxl       ZSET `<token>:<id>` -> until when (ms) the cancelled lease answers `cancelled`
-- kj        prefix of `kj:<key>`, each key's jobs (keyed.lua: key_unindex): a cancelled keyed
--           job leaves it
-- waiting   ZSET id -> due_ms: jobs waiting for their dependencies (cancelled like scheduled ones)
-- ix        (tail; a queue with a lane only) the id's index bucket `ix:<b>`
-- Arguments: id, running (1: a leased job is cancelled too).
-- Returns R_OK (this call removed a scheduled job) | R_CANCELLING (this call ended a leased job
-- cancelled: its record and lease are gone, its batch counts it cancelled, its key's and the
-- queue's in-flight slots are free, and `cxl` remembers its lease until an hour past the
-- lease's deadline so that the lease's extend, ack and nack answer `cancelled`) | R_LEASED
-- (without `running`) | R_DEAD | R_MISSING (nothing changed).
-- A lane job's entry stays in the lane as a tombstone of its due time, its bit set in
-- lanegone, until a claim passes it.
-- Safe to run twice: the second run finds nothing and answers R_MISSING (a leased job's
-- second run too: its lease is gone; `cxl` still answers its worker).
local raw, deadline, code = nil, nil, nil
if redis.call('ZREM', sched, id) == 1 or redis.call('ZREM', ready, id) == 1
  or redis.call('ZREM', waiting, id) == 1 then
  raw = redis.call('HGET', jobs, id)
  redis.call('HDEL', jobs, id)
  code = R_OK
elseif running then
  deadline = redis.call('ZSCORE', lease, id)
  raw = deadline and redis.call('HGET', jobs, id)
  if raw then
    redis.call('ZREM', lease, id)
    redis.call('HDEL', jobs, id)
    code = R_CANCELLING
  end
end
if code then
  local now = now_ms()
  if raw and has(string.byte(raw, 2), F_EXTRA) then
    --@ define batch_end batch_count
    local bacc = {}
    batch_end(bacc, raw, id, 'c')
    batch_count(bm, bacc, now)
  end
  if raw and has(string.byte(raw, 2), F_EXTRA) then
    --@ define key_unindex dep_end dep_post
    key_unindex(kj, raw, id)
    -- Jobs waiting for it hear of it (deps.lua).
    local dacc = {}
    dep_end(dacc, raw, id, 'c')
    if #dacc > 0 or dacc.forget then dep_post(jobs, dacc, now) end
  end
  if code == R_CANCELLING then
    local lflags = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
    if bit.band(lflags, L_KEYS) ~= 0 then
      --@ define key_ended key_free
      local ended = {}
      key_ended(ended, raw)
      if key_free(kinfl, kwait, ready, ended) then redis.call(PUBLISH, wake, 0) end
    end
    limit_freed(stat, wake, lflags)
    -- The leases whose time is up are forgotten (a few a call; the commands of the one ACL
    -- rule, docs/GUIDE.md).
    local old = redis.call('ZRANGEBYSCORE', cxl, '-inf', now, 'LIMIT', 0, 100)
    if #old > 0 then redis.call('ZREM', cxl, unpack(old)) end
    redis.call('ZADD', cxl, tonumber(deadline) + CANCELLED_KEPT_MS,
      string.format('%d', rec_token(raw)) .. ':' .. id)
  end
  return code
end
if ix_n > 0 then
  local L = { lane = lane, meta = lanemeta, gone = lanegone, ix = KEYS[ix_at] }
  if lane_drop(L, id) then return R_OK end
end
return refusal(state_of(sched, lease, dead, id, ready))
