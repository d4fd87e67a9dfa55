-- dead.lua: puts dead jobs back (requeue: due now, attempts and error reset) or deletes them
-- (not requeue): one by id, or the oldest failures first.
-- Keys (declared in transitions/dead.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- dead      ZSET id -> failed_at ms
-- jobs      HASH id -> record
-- wake      channel of the queue's consumers
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- ix        (tail; a queue with a lane, one job only) the id's index bucket `ix:<b>`
-- Arguments: requeue (true: put back; false: delete), one (true: the job `id`; false: the
-- oldest failures, at most `most` of them), id, most.
-- Returns coded{ code, value }: R_OK and the number requeued or deleted, or (one job)
-- R_SCHEDULED / R_LEASED / R_MISSING (nothing changed).
-- Safe to run twice: a job requeued or deleted is no longer dead, so a second call for one
-- job answers R_SCHEDULED, R_LEASED or R_MISSING, and a second for the oldest touches only
-- jobs that died meanwhile (the caller asked for all of them).
local ids
if one then
  ids = { id }
  if not redis.call('ZSCORE', dead, id) then
    local L = ix_n > 0 and { lane = lane, meta = lanemeta, ix = KEYS[ix_at] }
    return coded{ code = refusal(state_of(sched, lease, dead, id, ready, L)), value = 0 }
  end
else
  ids = redis.call('ZRANGE', dead, 0, most - 1)
end
if #ids == 0 then return coded{ code = R_OK, value = 0 } end
if not requeue then
  call_chunked('HDEL', jobs, ids)
  call_chunked('ZREM', dead, ids)
  return coded{ code = R_OK, value = #ids }
end
local now = now_ms()
wake_if_earlier(sched, wake, now)
for _, job in ipairs(ids) do
  redis.call('ZREM', dead, job)
  local raw = redis.call('HGET', jobs, job)
  if raw then
    local r = decode(raw)
    r.attempt = 0
    r.err = nil
    r.due = now
    redis.call('HSET', jobs, job, encode(r))
    redis.call('ZADD', sched, now, job)
  end
end
return coded{ code = R_OK, value = #ids }
