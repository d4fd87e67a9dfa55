-- delayq script; constants from Rust written in (scripts.rs)
-- dead_purge.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local lease = KEYS[2]
local dead = KEYS[3]
local jobs = KEYS[4]
local ready = KEYS[5]
local lane = KEYS[6]
local lanemeta = KEYS[7]
local ix_n = tonumber(ARGV[2])
local ix_at = 8 -- ix: KEYS[ix_at] .. KEYS[ix_at + ix_n - 1]
local one = (ARGV[3] == '1')
local id = ARGV[4]
local most = tonumber(ARGV[5])
local function coded(t) return { t.code, t.value } end
-- Runs `cmd key a1 a2 ...` over a flat list in chunks (Lua's unpack limit is ~8000 values).
local function call_chunked(cmd, key, list)
  local step = 2000
  for i = 1, #list, step do
    local j = math.min(i + step - 1, #list)
    redis.call(cmd, key, unpack(list, i, j))
  end
end
-- The reply code refusing an operation on a job in state `st` (nil: missing).
local function refusal(st)
  if st == 0 then return -3 end
  if st == 1 then return -4 end
  if st == 2 then return -5 end
  return -1
end
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
-- The state code of `id` by the sorted set that holds it, or nil when it does not exist
-- (`ready`: due jobs of a queue with priorities, see promote; `L`: the lane, lane_find).
local function state_of(sched, lease, dead, id, ready, L)
  if redis.call('ZSCORE', sched, id) then return 0 end
  if L and lane_find(L, id) then return 0 end
  if ready and redis.call('ZSCORE', ready, id) then return 0 end
  if redis.call('ZSCORE', lease, id) then return 1 end
  if redis.call('ZSCORE', dead, id) then return 2 end
  return nil
end

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
-- Returns coded{ code, value }: 1 and the number deleted, or (one job) -3 /
-- -4 / -1 (nothing changed).
-- Safe to run twice: a second call for one job finds nothing and answers -1; a second
-- for the oldest deletes only jobs that died meanwhile (the caller asked for all to go).
if one then
  if redis.call('ZREM', dead, id) == 0 then
    local L = ix_n > 0 and { lane = lane, meta = lanemeta, ix = KEYS[ix_at] }
    return coded{ code = refusal(state_of(sched, lease, dead, id, ready, L)), value = 0 }
  end
  redis.call('HDEL', jobs, id)
  return coded{ code = 1, value = 1 }
end
local ids = redis.call('ZRANGE', dead, 0, most - 1)
if #ids > 0 then
  call_chunked('HDEL', jobs, ids)
  call_chunked('ZREM', dead, ids)
end
return coded{ code = 1, value = #ids }
