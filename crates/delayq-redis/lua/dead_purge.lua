-- dead_purge.lua: deletes dead jobs: one by id, or the oldest failures first.
-- Keys (declared in transitions/dead_purge.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- dead      ZSET id -> failed_at ms
-- jobs      HASH id -> record
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- ix        (tail; a queue with a lane, one job only) the id's index bucket `ix:<b>`
-- Arguments: one (true: the job `id`; false: the oldest failures, at most `most` of them), id,
-- most.
-- Returns coded{ code, value }: R_OK and the number deleted, or (one job) R_SCHEDULED /
-- R_LEASED / R_MISSING (nothing changed).
-- Safe to run twice: a second call for one job finds nothing and answers R_MISSING; a second
-- for the oldest deletes only jobs that died meanwhile (the caller asked for all to go).
if one then
  if redis.call('ZREM', dead, id) == 0 then
    local L = ix_n > 0 and { lane = lane, meta = lanemeta, ix = KEYS[ix_at] }
    return coded{ code = refusal(state_of(sched, lease, dead, id, ready, L)), value = 0 }
  end
  redis.call('HDEL', jobs, id)
  return coded{ code = R_OK, value = 1 }
end
local ids = redis.call('ZRANGE', dead, 0, most - 1)
if #ids > 0 then
  call_chunked('HDEL', jobs, ids)
  call_chunked('ZREM', dead, ids)
end
return coded{ code = R_OK, value = #ids }
