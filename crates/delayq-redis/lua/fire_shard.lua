-- fire_shard.lua: one fire of a schedule on a queue of several shards (delayq::schedule):
-- enqueues the job NAME@<fire ms> into the shard its id hashes to, unless that shard already
-- took this fire or a later one of the schedule. advance.lua then moves the next fire on.
-- Keys (declared in transitions/fire_shard.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- jobs      HASH id -> record
-- wake      channel of the queue's consumers
-- stat      STRING paused flag and series of counts (common.lua: count)
-- fired     HASH schedule name -> the latest fire (ms) enqueued into this shard
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- ix        (tail; a queue with a lane only) the index bucket `ix:<b>` of the fire's id
-- Arguments: name (the schedule), at (the fire, ms in decimal: as the id carries it),
-- max_attempts, flags and rest (the record's flags and its part after the header, as
-- enqueue.lua).
-- Returns whether it enqueued the fire: true (unless its id exists, in `jobs` or in the lane), false when
-- this shard already had it (or a later fire).
-- Safe to run twice: the first run records the fire in `fired`, so the second writes
-- nothing. Fires of one schedule reach a shard in increasing order (each is enqueued before
-- the next fire is stored), so "this fire or a later one" is the test that makes a fire
-- enqueued once even when the process that enqueued it dies before moving the next fire on
-- and another process fires it again — even after its job ran and was acknowledged.
local L = ix_n > 0 and { lane = lane, meta = lanemeta, ix = KEYS[ix_at] }
local fire = tonumber(at)
local last = redis.call('HGET', fired, name)
if last and tonumber(last) >= fire then
  return 0
end
local now = now_ms()
local due = math.max(fire, now)
local id = name .. '@' .. at
local rec = struct.pack(HEADER, RECORD_VERSION, flags, 0, max_attempts, due, now, 0) .. rest
redis.call('HSET', fired, name, at)
if not (L and lane_find(L, id)) and redis.call('HSETNX', jobs, id, rec) == 1 then
  wake_if_earlier(sched, wake, due)
  redis.call('ZADD', sched, due, id)
  count(stat, now, 0, 1)
end
return 1
