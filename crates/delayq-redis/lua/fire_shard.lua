-- fire_shard.lua: one fire of a schedule on a queue of several shards (delayq::periodic):
-- enqueues the job NAME@<fire ms> into the shard its id hashes to, unless that shard already
-- took this fire or a later one of the schedule. advance.lua then moves the next fire on.
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] jobs   HASH id -> record
-- KEYS[3] wake   channel of the queue's consumers
-- KEYS[4] stat   STRING paused flag and series of counts (common.lua: count)
-- KEYS[5] fired  HASH schedule name -> the latest fire (ms) enqueued into this shard
-- KEYS[6] lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- KEYS[7] lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- KEYS[8+] (a queue with a lane only) the index bucket `ix:<b>` of the fire's id
-- ARGV[1] schedule name, ARGV[2] fire ms, ARGV[3] max_attempts, ARGV[4] flags, ARGV[5] tail
-- Returns 1 when it enqueued the fire (unless its id exists, in `jobs` or in the lane), 0 when
-- this shard already had it (or a later fire).
-- Safe to run twice: the first run records the fire in `fired`, so the second writes
-- nothing. Fires of one schedule reach a shard in increasing order (each is enqueued before
-- the next fire is stored), so "this fire or a later one" is the test that makes a fire
-- enqueued once even when the process that enqueued it dies before moving the next fire on
-- and another process fires it again — even after its job ran and was acknowledged.
-- The first extra key (an index bucket), after the declared ones.
local ix0 = 8
local sched, jobs, wake, stat, fired = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local L = KEYS[ix0] and { lane = KEYS[6], meta = KEYS[7], ix = KEYS[ix0] }
local name, fire = ARGV[1], tonumber(ARGV[2])
local last = redis.call('HGET', fired, name)
if last and tonumber(last) >= fire then
  return 0
end
local now = now_ms()
local due = math.max(fire, now)
local id = name .. '@' .. ARGV[2]
local rec = struct.pack(HEADER, RECORD_VERSION, tonumber(ARGV[4]), 0, tonumber(ARGV[3]), due, now, 0)
  .. ARGV[5]
redis.call('HSET', fired, name, ARGV[2])
if not (L and lane_find(L, id)) and redis.call('HSETNX', jobs, id, rec) == 1 then
  wake_if_earlier(sched, wake, due)
  redis.call('ZADD', sched, due, id)
  count(stat, now, 0, 1)
end
return 1
