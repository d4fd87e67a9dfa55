-- fire.lua: fires a schedule (delayq::schedule): enqueues its due fires as jobs NAME@<fire ms>
-- and stores its next fire, only while its stored next fire is the one the ticker read.
-- Keys (declared in transitions/fire.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- jobs      HASH id -> record
-- wake      channel of the queue's consumers
-- stat      STRING paused flag and series of counts (common.lua: count)
-- cronnext  ZSET schedule name -> next fire ms
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- ix        (tail; a queue with a lane only) the index bucket `ix:<b>` of each fire's id, in
--           order
-- Arguments: name (the schedule), expected (the next fire the ticker read), next_fire (the next
-- fire to store), max_attempts, flags and rest (the record's flags and its part after the
-- header, as enqueue.lua), then the tail `fires` of fire times (ms, in decimal: as the ids
-- carry them).
-- Returns whether it fired: true (each fire's job created unless its id exists, in `jobs` or in the
-- lane: a job enqueued with a fire's id counts as that fire), false when the stored
-- next fire is another (someone fired it first, or the schedule changed or is gone).
-- Safe to run twice: the first run moved the next fire on, so the second answers false and writes
-- nothing — every fire is enqueued once, whichever process ticks.
local L = ix_n > 0 and { lane = lane, meta = lanemeta }
local cur = redis.call('ZSCORE', cronnext, name)
if not cur or tonumber(cur) ~= expected then
  return 0
end
local now = now_ms()
local zadd, created, earliest = {}, 0, nil
for i = 1, fires_n do
  local at = fires_at[i]
  -- Due at its fire time; a past one (a late tick, a caught-up fire) is due now, as enqueue
  -- treats a past run_at (the fire time stays in the id).
  local due = math.max(tonumber(at), now)
  local id = name .. '@' .. at
  local rec = struct.pack(HEADER, RECORD_VERSION, flags, 0, max_attempts, due, now, 0) .. rest
  if L then L.ix = KEYS[ix_at + i - 1] end
  if not (L and lane_find(L, id)) and redis.call('HSETNX', jobs, id, rec) == 1 then
    zadd[#zadd + 1] = due
    zadd[#zadd + 1] = id
    created = created + 1
    if earliest == nil or due < earliest then earliest = due end
  end
end
if earliest ~= nil then
  wake_if_earlier(sched, wake, earliest)
  call_chunked('ZADD', sched, zadd)
  count(stat, now, 0, created)
end
redis.call('ZADD', cronnext, next_fire, name)
return 1
