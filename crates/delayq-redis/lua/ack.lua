-- ack.lua: acknowledges leased jobs: their records are deleted, or kept as done when a
-- retention says so (common.lua: keep_done).
-- Keys (declared in transitions/ack.rs, which generates the locals):
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- stat      STRING paused flag, limits, retention and series of counts (common.lua)
-- wake      channel of the queue's consumers (woken when a full max_in_flight frees)
-- done      ZSET id -> when its retention ends (ms)
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- ready     ZSET a keyed queue's due jobs in turns (keyed.lua; only with L_KEYS: an acked
--           job's key frees a slot, which wakes consumers when a parked job comes back)
-- kinfl     HASH key -> its jobs leased (keyed.lua: key_free)
-- kwait     ZSET key -> when a parked job comes back; `kwait:<key>` its parked jobs
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard (batch.lua; only with
--           L_BATCH): a job that ends is counted there
-- cxl       ZSET `<token>:<id>` -> until when: leases cancelled while they ran (cancel.lua)
-- kj        prefix of `kj:<key>`, each key's jobs (keyed.lua: key_unindex): an acked keyed job
--           leaves it
-- ix        (tail; a queue with a lane only) each ack's index bucket `ix:<b>`, in order
-- An acked job that others wait for posts its end to the outbox (deps.lua: dep_post).
-- Arguments: the tail `acks` of (id, token, result): result is the handler's result kept with
-- a job kept as done (delayq::Completion; empty: none).
-- Returns one code per pair: R_OK (acked), R_LOST (the job exists under another lease or
-- none), R_CANCELLED (cancelled while it ran), R_MISSING (no such job); refused pairs change
-- nothing.
-- Safe to run twice: a second run finds the records gone (or done, with no token) and answers
-- R_MISSING or R_LOST, changing nothing (a client that resends after a lost reply reads either
-- as "done or cancelled").
-- The lane's helpers are defined only for a queue with a lane (scripts.rs: DEFINE).
local in_lane = nil
if ix_n > 0 then
  --@ define lane_find
  in_lane = function(i, id)
    return lane_find({ lane = lane, meta = lanemeta, ix = KEYS[ix_at + i - 1] }, id)
  end
end
local lflags = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
local now = now_ms()
local ret = queue_retention(stat, lflags)
local out, kept, raws =
  ack_pairs(jobs, lease, acks_id, acks_token, acks_n, done, ret, now, in_lane, acks_result, cxl)
-- A batch queue's and a keyed queue's helpers are defined only when it is one (scripts.rs:
-- DEFINE); `bacc` notes the ends of batch jobs (batch.lua), counted at the end.
local batched = bit.band(lflags, L_BATCH) ~= 0
local bacc = batched and {} or nil
if batched then
  --@ define batch_end batch_count
end
local keyed = bit.band(lflags, L_KEYS) ~= 0
if keyed then
  --@ define key_ended key_free key_unindex
end
local acked, ended = 0, {}
-- Ends of jobs that others wait for (deps.lua), posted to the outbox at the end.
local dacc = {}
for i = 1, #out do
  if out[i] == R_OK then
    acked = acked + 1
    dep_end(dacc, raws[i], acks_id[i], 'o', acks_result[i])
    if keyed then
      key_ended(ended, raws[i])
      key_unindex(kj, raws[i], acks_id[i])
    end
    if batched then batch_end(bacc, raws[i], acks_id[i], 'o', acks_result[i]) end
  end
end
if keyed and key_free(kinfl, kwait, ready, ended) then redis.call(PUBLISH, wake, 0) end
if batched then batch_count(bm, bacc, now) end
if #dacc > 0 or dacc.forget then dep_post(jobs, dacc, now) end
if acked > 0 then
  count(stat, now, 1, acked)
  limit_freed(stat, wake, lflags)
end
if kept > 0 or ret then trim_done(jobs, done, now) end
if kept > 0 and not ret then mark_retains(stat) end
return out
