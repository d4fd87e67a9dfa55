-- nack.lua: fails one attempt of a leased job: retry later, or dead-letter.
-- Keys (declared in transitions/nack.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- dead      ZSET id -> failed_at ms
-- wake      channel of the queue's consumers
-- stat      STRING paused flag and series of counts (common.lua: count)
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- ready     ZSET a keyed queue's due jobs in turns (keyed.lua; only with L_KEYS)
-- kinfl     HASH key -> its jobs leased (keyed.lua: key_free)
-- kwait     ZSET key -> when a parked job comes back; `kwait:<key>` its parked jobs
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard (batch.lua; only with
--           L_BATCH): a job that ends is counted there
-- cxl       ZSET `<token>:<id>` -> until when: leases cancelled while they ran (cancel.lua)
-- ix        (tail; a queue with a lane only) the id's index bucket `ix:<b>`
-- Arguments: id, token, err (the error message, cut on a character boundary by the caller),
-- retry_ms (-1: the job's backoff), dead_now (dead-letter now), rnd (uniform in [0, 1), for
-- jitter).
-- Returns coded{ code, value }: R_RETRY and the due time, R_BURIED and the time it failed, or
-- R_LOST / R_CANCELLED (cancelled while it ran) / R_MISSING (nothing changed).
-- Safe to run twice: the first run clears the lease token, so a second finds no lease and
-- answers R_LOST, changing nothing.
local raw, why = leased_raw(jobs, id, token,
  ix_n > 0 and { lane = lane, meta = lanemeta, ix = KEYS[ix_at] }, cxl)
if not raw then
  return coded{ code = why, value = 0 }
end
local r = decode(raw)
local now = now_ms()
redis.call('ZREM', lease, id)
local lflags = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
limit_freed(stat, wake, lflags)
if bit.band(lflags, L_KEYS) ~= 0 then
  --@ define key_ended key_free
  local ended = {}
  key_ended(ended, raw)
  if key_free(kinfl, kwait, ready, ended) then redis.call(PUBLISH, wake, 0) end
end
r.err = err
if dead_now or r.attempt >= r.max_attempts then
  bury(jobs, dead, id, r, now)
  if bit.band(lflags, L_BATCH) ~= 0 then
    --@ define batch_end batch_count
    local bacc = {}
    batch_end(bacc, raw, id, 'd')
    batch_count(bm, bacc, now)
  end
  count(stat, now, 3, 1)
  -- Jobs waiting for it hear of it (deps.lua).
  local dacc = {}
  dep_end(dacc, raw, id, 'd')
  if #dacc > 0 or dacc.forget then dep_post(jobs, dacc, now) end
  return coded{ code = R_BURIED, value = now }
end
local delay = retry_ms
if delay < 0 then
  delay = backoff_ms(r, r.attempt, rnd)
end
r.token = 0
r.due = now + delay
wake_if_earlier(sched, wake, r.due)
redis.call('HSET', jobs, id, encode(r))
redis.call('ZADD', sched, r.due, id)
count(stat, now, 2, 1)
return coded{ code = R_RETRY, value = r.due }
