-- cancel.lua: removes a scheduled job; reports what it found otherwise.
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
-- ix        (tail; a queue with a lane only) the id's index bucket `ix:<b>`
-- Arguments: id.
-- Returns R_OK (this call removed it) | R_LEASED | R_DEAD | R_MISSING (nothing changed).
-- A lane job's entry stays in the lane as a tombstone of its due time, its bit set in
-- lanegone, until a claim passes it.
-- Safe to run twice: the second run finds nothing and answers R_MISSING.
if redis.call('ZREM', sched, id) == 1 or redis.call('ZREM', ready, id) == 1 then
  local raw = redis.call('HGET', jobs, id)
  redis.call('HDEL', jobs, id)
  if raw and has(string.byte(raw, 2), F_EXTRA) then
    --@ define batch_end batch_count
    local bacc = {}
    batch_end(bacc, raw, id, 'c')
    batch_count(bm, bacc, now_ms())
  end
  return R_OK
end
if ix_n > 0 then
  local L = { lane = lane, meta = lanemeta, gone = lanegone, ix = KEYS[ix_at] }
  if lane_drop(L, id) then return R_OK end
end
return refusal(state_of(sched, lease, dead, id, ready))
