-- reschedule.lua: moves a scheduled job to a new due time.
-- Keys (declared in transitions/reschedule.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- dead      ZSET id -> failed_at ms
-- wake      channel of the queue's consumers
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- waiting   ZSET id -> due_ms: jobs waiting for their dependencies (they keep waiting)
-- ix        (tail; a queue with a lane only) the id's index bucket `ix:<b>`
-- Arguments: id, mode (SPEC_NOW | SPEC_DELAY | SPEC_AT: how `t` is read), t (ms).
-- Returns coded{ code, value }: R_OK and the new due time (ms), or R_LEASED / R_DEAD /
-- R_MISSING (nothing changed).
-- A lane job moves to `sched` (lane.lua: lane_pull) with its new due time.
-- Safe to run twice: the second run sets the same due time (for a delay, one computed a
-- moment later).
-- A job waiting for its dependencies keeps waiting, due then once they have ended.
if redis.call('ZSCORE', waiting, id) then
  local due = due_from(mode, t, now_ms())
  local r = decode(redis.call('HGET', jobs, id))
  r.due = due
  redis.call('HSET', jobs, id, encode(r))
  redis.call('ZADD', waiting, due, id)
  return coded{ code = R_OK, value = due }
end
if ix_n > 0 then
  lane_pull({ lane = lane, meta = lanemeta, gone = lanegone, ix = KEYS[ix_at] }, jobs, sched, id)
end
if not redis.call('ZSCORE', sched, id) then
  -- A due job of a queue with priorities waits in `ready`: it goes back to `sched`.
  if redis.call('ZREM', ready, id) == 0 then
    return coded{ code = refusal(state_of(sched, lease, dead, id)), value = 0 }
  end
end
local now = now_ms()
local due = due_from(mode, t, now)
local r = decode(redis.call('HGET', jobs, id))
r.due = due
wake_if_earlier(sched, wake, due)
redis.call('HSET', jobs, id, encode(r))
redis.call('ZADD', sched, due, id)
return coded{ code = R_OK, value = due }
