-- delayq script; constants from Rust written in (scripts.rs)
-- get.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local lease = KEYS[2]
local jobs = KEYS[3]
local dead = KEYS[4]
local lane = KEYS[5]
local lanemeta = KEYS[6]
local waiting = KEYS[7]
local ix_n = tonumber(ARGV[2])
local ix_at = 8 -- ix: KEYS[ix_at] .. KEYS[ix_at + ix_n - 1]
local id = ARGV[3]
local function found(t) return { t.state, t.at, t.rec } end
local function has(flags, f)
  return bit.band(flags, f) ~= 0
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

-- get.lua: one job in any state (read only).
-- Keys (declared in transitions/get.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- dead      ZSET id -> failed_at ms
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- waiting   ZSET id -> due_ms: jobs waiting for their dependencies
-- ix        (tail; a queue with a lane only) the id's index bucket `ix:<b>`
-- Arguments: id.
-- Returns false when missing, else found{ state, at, rec }: its ST_* state code, its lease
-- deadline or failed-at time (ms; -1 for the other states) and its record (a done job is told
-- by its record: 128; its completion time is in the record).
-- Safe to run twice: it writes nothing.
local raw = redis.call('HGET', jobs, id)
if not raw then
  if ix_n == 0 then return false end
  local s, rec = lane_find({ lane = lane, meta = lanemeta, ix = KEYS[ix_at] }, id)
  if not s then return false end
  return found{ state = 0, at = -1, rec = rec }
end
local d = redis.call('ZSCORE', lease, id)
if d then return found{ state = 1, at = tonumber(d), rec = raw } end
d = redis.call('ZSCORE', dead, id)
if d then return found{ state = 2, at = tonumber(d), rec = raw } end
if has(string.byte(raw, 2), 128) then return found{ state = 3, at = -1, rec = raw } end
if redis.call('ZSCORE', waiting, id) then return found{ state = 4, at = -1, rec = raw } end
return found{ state = 0, at = -1, rec = raw }
