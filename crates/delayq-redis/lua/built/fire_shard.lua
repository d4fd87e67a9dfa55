-- delayq script; constants from Rust written in (scripts.rs)
-- fire_shard.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local jobs = KEYS[2]
local wake = KEYS[3]
local stat = KEYS[4]
local fired = KEYS[5]
local lane = KEYS[6]
local lanemeta = KEYS[7]
local ix_n = tonumber(ARGV[2])
local ix_at = 8 -- ix: KEYS[ix_at] .. KEYS[ix_at + ix_n - 1]
local name = ARGV[3]
local at = ARGV[4]
local max_attempts = tonumber(ARGV[5])
local flags = tonumber(ARGV[6])
local rest = ARGV[7]
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + clock_offset_us
end
local function now_ms()
  return math.floor(now_us() / 1000)
end
-- Tells waiting consumers that a job due at `due` exists, if it is earlier than the head
-- they are sleeping towards (and than `bound`, when given: the lane's first due time). Call
-- before adding the job to `sched`.
local function wake_if_earlier(sched, wake, due, bound)
  if bound and due >= bound then return end
  local head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
  if head[2] == nil or due < tonumber(head[2]) then
    redis.call('PUBLISH', wake, due)
  end
end
-- Interval n begins in the slot at byte `at`, where `c` was just added: folds the last
-- interval into the totals (minus `c` when it shares the slot), then zeroes and stamps the
-- slot and sets it as the last. A clock stepping back across an interval boundary leaves the
-- counts where they landed (lost to the series).
local function new_interval(stat, n, at, c)
  local last = redis.call('BITFIELD', stat, 'GET', 'u32', 4 * 8)[1]
  if last > n then return false end
  if last ~= 0 then
    local lat = 168 + (last % 360) * 84
    local raw = redis.call('GETRANGE', stat, lat, lat + 84 - 1)
    if #raw == 84 and struct.unpack('>I4', raw) == last then
      local add = { 'BITFIELD', stat }
      for i = 0, 20 - 1 do
        local v = struct.unpack('>I4', raw, 5 + 4 * i)
        if lat == at then v = v - (c[i] or 0) end
        if v > 0 then
          add[#add + 1] = 'INCRBY'
          add[#add + 1] = 'i64'
          add[#add + 1] = (8 + 8 * i) * 8
          add[#add + 1] = v
        end
      end
      if #add > 2 then redis.call(unpack(add)) end
    end
  end
  redis.call('SETRANGE', stat, at, struct.pack('>I4', n) .. string.rep('\0', 84 - 4))
  redis.call('BITFIELD', stat, 'SET', 'u32', 4 * 8, n)
  return true
end
-- Adds `v` to counter `i` — or, with `c` (counter index -> n), every count of `c` — in now's
-- interval: one BITFIELD that also reads the slot's interval number; when the slot held
-- another one (once per interval, see new_interval) it is counted in again. Counting never
-- fails a transition: under a full store (`maxmemory`) the counts are skipped.
local function count(stat, now, i, v, c)
  local n = math.floor(now / 10000)
  local at = 168 + (n % 360) * 84
  local base = (at + 4) * 8
  local r, args
  if c == nil then
    r = redis.pcall('BITFIELD', stat, 'GET', 'u32', at * 8, 'INCRBY', 'u32', base + 32 * i, v)
  else
    args = { 'BITFIELD', stat, 'GET', 'u32', at * 8 }
    local k = 5
    for j, w in pairs(c) do
      if w > 0 then
        args[k + 1], args[k + 2], args[k + 3], args[k + 4] = 'INCRBY', 'u32', base + 32 * j, w
        k = k + 4
      end
    end
    if k == 5 then return end
    r = redis.pcall(unpack(args))
  end
  if type(r) ~= 'table' or r.err or r[1] == n then return end
  -- Rare: the first count of an interval.
  if c == nil then
    c = { [i] = v }
    args = { 'BITFIELD', stat, 'INCRBY', 'u32', base + 32 * i, v }
  end
  local ok, again = pcall(new_interval, stat, n, at, c)
  if ok and again then redis.pcall(unpack(args)) end
end

-- Rate and concurrency limits (delayq::QueueSettings::shard_throttle): when the byte at 1
-- has 1, the 32 bytes at 30408 of the `stat` string hold per_s (0: no rate
-- limit), burst, max_in_flight (0: none), the bucket's tokens and when they were counted (µs).
-- 2: a claim was held back by max_in_flight, so the next freed slot wakes consumers.
-- A queue without limits pays one byte more in a GETRANGE the claim makes anyway.
-- The id and the record of a lane entry.
local function lane_entry(e)
  local n = string.byte(e, 1)
  return string.sub(e, 2, 1 + n), string.sub(e, 2 + n)
end
-- Whether a lane entry is a cancelled job's tombstone.
local function lane_dead(e)
  return string.byte(e, 1) == 0
end
-- The lane's head sequence number and the sequence number of bit 0 of `lanegone`.
local function lane_hb(meta)
  local v = redis.call('HMGET', meta, 'h', 'b')
  return tonumber(v[1] or 0), tonumber(v[2] or 0)
end
-- A window's start as its member of `<lane>:w`, its field of `<lane>:t` and its key's suffix
-- (`s`: a number or the member string).
local function win_member(s)
  return string.format('%.0f', s)
end
-- The LIST of the window that starts at `s`.
local function win_key(lane, s)
  return lane .. ':' .. win_member(s)
end
-- What an index entry `v` points at, tagged by its first byte (keys.rs `IndexEntry` writes
-- the same): 'L' and the one-delay lane's sequence number, or 'W' and the window's
-- start and place. An entry written before the tags (a decimal number, or the 9 bytes of start
-- and place, whose first byte is below '0') reads as the same kind.
-- Returns kind, a, b: 'L', sequence number, nil | 'W', start, place.
local function ix_entry(v)
  local tag = string.sub(v, 1, 1)
  if tag == 'L' then return 'L', tonumber(string.sub(v, 2)), nil end
  if tag == 'W' then
    local start, pos = struct.unpack('>I6I3', v, 2)
    return 'W', start, pos
  end
  if string.byte(v, 1) >= 48 then return 'L', tonumber(v), nil end
  local start, pos = struct.unpack('>I6I3', v)
  return 'W', start, pos
end
-- The id, index bucket and record of a window's entry.
local function win_entry(e)
  local n = string.byte(e, 1)
  return string.sub(e, 2, 1 + n), (struct.unpack('>H', e, 2 + n)), string.sub(e, 4 + n)
end
-- The lane entry of `id` (index bucket `ix`), or nil. Returns kind, rec, a, b, c: 'L',
-- its record, its sequence number, the lane's head sequence number and bitmap base (lane_hb)
-- | 'W', its record, the window's start, its place there, nil.
local function lane_find(L, id)
  local v = redis.call('HGET', L.ix, id)
  if not v then return nil end
  local kind, s, pos = ix_entry(v)
  if kind == 'W' then
    local e = redis.call('LINDEX', win_key(L.lane, s), pos)
    if not e or lane_dead(e) then return nil end
    local eid, _, rec = win_entry(e)
    if eid ~= id then return nil end
    return 'W', rec, s, pos, nil
  end
  local h, b = lane_hb(L.meta)
  if s < h then return nil end
  local e = redis.call('LINDEX', L.lane, s - h)
  if not e then return nil end
  local eid, rec = lane_entry(e)
  if eid ~= id then return nil end
  return 'L', rec, s, h, b
end

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
local rec = struct.pack('>BBHHI6I6I6', 1, flags, 0, max_attempts, due, now, 0) .. rest
redis.call('HSET', fired, name, at)
if not (L and lane_find(L, id)) and redis.call('HSETNX', jobs, id, rec) == 1 then
  wake_if_earlier(sched, wake, due)
  redis.call('ZADD', sched, due, id)
  count(stat, now, 0, 1)
end
return 1
