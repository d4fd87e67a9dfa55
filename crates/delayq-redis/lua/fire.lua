-- fire.lua: fires a schedule (delayq::periodic): enqueues its due fires as jobs NAME@<fire ms>
-- and stores its next fire, only while its stored next fire is the one the ticker read.
-- KEYS[1] sched     ZSET id -> due_ms
-- KEYS[2] jobs      HASH id -> record
-- KEYS[3] wake      channel of the queue's consumers
-- KEYS[4] stat      STRING paused flag and series of counts (common.lua: count)
-- KEYS[5] cronnext  ZSET schedule name -> next fire ms
-- KEYS[6] lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- KEYS[7] lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- KEYS[8+] (a queue with a lane only) the index bucket `ix:<b>` of each fire's id, in order
-- ARGV[1] schedule name, ARGV[2] the next fire the ticker read, ARGV[3] the next fire to store,
-- ARGV[4] max_attempts, ARGV[5] flags, ARGV[6] tail (as enqueue.lua), then the fire times (ms)
-- Returns 1 when it fired (each fire's job created unless its id exists, in `jobs` or in the
-- lane: a job enqueued with a fire's id counts as that fire), 0 when the stored
-- next fire is another (someone fired it first, or the schedule changed or is gone).
-- Safe to run twice: the first run moved the next fire on, so the second answers 0 and writes
-- nothing — every fire is enqueued once, whichever process ticks.
-- The first extra key (an index bucket), after the declared ones.
local ix0 = 8
local sched, jobs, wake, stat, cronnext = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local L = KEYS[ix0] and { lane = KEYS[6], meta = KEYS[7] }
local name = ARGV[1]
local cur = redis.call('ZSCORE', cronnext, name)
if not cur or tonumber(cur) ~= tonumber(ARGV[2]) then
  return 0
end
local now = now_ms()
local flags, max_attempts, tail = tonumber(ARGV[5]), tonumber(ARGV[4]), ARGV[6]
local zadd, created, earliest = {}, 0, nil
for i = 7, #ARGV do
  -- Due at its fire time; a past one (a late tick, a caught-up fire) is due now, as enqueue
  -- treats a past run_at (the fire time stays in the id).
  local due = math.max(tonumber(ARGV[i]), now)
  local id = name .. '@' .. ARGV[i]
  local rec = struct.pack(HEADER, RECORD_VERSION, flags, 0, max_attempts, due, now, 0) .. tail
  if L then L.ix = KEYS[ix0 + i - 7] end
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
redis.call('ZADD', cronnext, ARGV[3], name)
return 1
