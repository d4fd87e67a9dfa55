-- delayq script; constants from Rust written in (scripts.rs)
-- reschedule.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local lease = KEYS[2]
local jobs = KEYS[3]
local dead = KEYS[4]
local wake = KEYS[5]
local ready = KEYS[6]
local lane = KEYS[7]
local lanemeta = KEYS[8]
local lanegone = KEYS[9]
local waiting = KEYS[10]
local ix_n = tonumber(ARGV[2])
local ix_at = 11 -- ix: KEYS[ix_at] .. KEYS[ix_at + ix_n - 1]
local id = ARGV[3]
local mode = tonumber(ARGV[4])
local t = tonumber(ARGV[5])
local function coded(t) return { t.code, t.value } end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + clock_offset_us
end
local function now_ms()
  return math.floor(now_us() / 1000)
end
local function has(flags, f)
  return bit.band(flags, f) ~= 0
end
local function rec_due(rec)
  return (struct.unpack('>I6', rec, 7))
end
-- Full decode and encode, for the paths that change more than the header.
local function decode(s)
  local r = {}
  local version, flags, pos
  version, flags, r.attempt, r.max_attempts, r.due, r.created, r.token, pos =
    struct.unpack('>BBHHI6I6I6', s)
  if version ~= 1 then
    error('delayq: unknown record version ' .. tostring(version))
  end
  if has(flags, 1) then
    r.lease, pos = struct.unpack('>I4', s, pos)
  end
  if has(flags, 2) then
    r.bkind, r.bbase, r.bcap, pos = struct.unpack('>BI4I4', s, pos)
  end
  if has(flags, 8) then
    r.timeout, pos = struct.unpack('>I4', s, pos)
  end
  if has(flags, 16) then
    r.expires, pos = struct.unpack('>I6', s, pos)
    r.expires_rel = has(flags, 32)
  end
  if has(flags, 64) then
    local n
    n, pos = struct.unpack('>B', s, pos)
    for _ = 1, n do
      local tag
      tag, pos = struct.unpack('>B', s, pos)
      if tag == 1 then
        r.prio, pos = struct.unpack('>B', s, pos)
      elseif tag == 2 then
        r.keep, pos = struct.unpack('>I6', s, pos)
      elseif tag == 3 then
        r.dedupe, pos = struct.unpack('>I6', s, pos)
      elseif tag == 4 then
        local n
        n, pos = struct.unpack('>H', s, pos)
        r.target = string.sub(s, pos, pos + n - 1)
        pos = pos + n
      elseif tag >= 16 then
        -- 16, 17, or a later build's sized extra: kept as read, written back by
        -- encode.
        local n
        n, pos = struct.unpack('>H', s, pos)
        if tag == 16 then
          r.trace = string.sub(s, pos, pos + n - 1)
        elseif tag == 17 then
          r.result = string.sub(s, pos, pos + n - 1)
        else
          r.sized = r.sized or {}
          r.sized[#r.sized + 1] = string.sub(s, pos - 3, pos + n - 1)
        end
        pos = pos + n
      else
        error('delayq: unknown record extra ' .. tostring(tag))
      end
    end
  end
  if has(flags, 128) then
    r.done_at, r.dedupe_until, pos = struct.unpack('>I6I6', s, pos)
  end
  if has(flags, 4) then
    local n
    n, pos = struct.unpack('>H', s, pos)
    r.err = string.sub(s, pos, pos + n - 1)
    pos = pos + n
  end
  r.payload = string.sub(s, pos)
  return r
end
local function encode(r)
  local flags = 0
  local parts = {}
  if r.lease then
    flags = flags + 1
    parts[#parts + 1] = struct.pack('>I4', r.lease)
  end
  if r.bkind then
    flags = flags + 2
    parts[#parts + 1] = struct.pack('>BI4I4', r.bkind, r.bbase, r.bcap)
  end
  if r.timeout then
    flags = flags + 8
    parts[#parts + 1] = struct.pack('>I4', r.timeout)
  end
  if r.expires then
    flags = flags + 16
    if r.expires_rel then flags = flags + 32 end
    parts[#parts + 1] = struct.pack('>I6', r.expires)
  end
  local extras = {}
  if r.prio then extras[#extras + 1] = struct.pack('>BB', 1, r.prio) end
  if r.keep then extras[#extras + 1] = struct.pack('>BI6', 2, r.keep) end
  if r.dedupe then extras[#extras + 1] = struct.pack('>BI6', 3, r.dedupe) end
  if r.target then extras[#extras + 1] = struct.pack('>BH', 4, #r.target) .. r.target end
  if r.trace then extras[#extras + 1] = struct.pack('>BH', 16, #r.trace) .. r.trace end
  if r.result then
    extras[#extras + 1] = struct.pack('>BH', 17, #r.result) .. r.result
  end
  if r.sized then
    for i = 1, #r.sized do extras[#extras + 1] = r.sized[i] end
  end
  if #extras > 0 then
    flags = flags + 64
    parts[#parts + 1] = struct.pack('>B', #extras) .. table.concat(extras)
  end
  if r.done_at then
    flags = flags + 128
    parts[#parts + 1] = struct.pack('>I6I6', r.done_at, r.dedupe_until)
  end
  if r.err then
    -- Callers cut errors on a character boundary first (limits::truncate_error); this cut
    -- only bounds what a record can hold.
    local e = string.sub(r.err, 1, 1024)
    flags = flags + 4
    parts[#parts + 1] = struct.pack('>H', #e) .. e
  end
  return struct.pack('>BBHHI6I6I6', 1, flags, r.attempt, r.max_attempts, r.due, r.created,
    r.token or 0) .. table.concat(parts) .. r.payload
end
-- Due time from a schedule: `mode` (its bits 3) 1 now, 2 a delay of
-- `t` ms, 3 the absolute ms `t` (past = now).
local function due_from(mode, t, now)
  -- (4 is the highest bit: the rest of the byte is 3; arithmetic, no call.)
  local when = mode % 4
  if when == 2 then
    return now + t
  elseif when == 3 and t > now then
    return t
  end
  return now
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
-- What a cancelled entry keeps of its job: its due time (7 bytes instead of the whole job; no
-- id has length 0, so lane_find never takes it for a job).
local function lane_tomb(due)
  return '\0' .. struct.pack('>I6', due)
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
-- The HASH start -> tombstones of each window that has any.
local function wtombs_key(lane)
  return lane .. ':t'
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
-- `k` entries of the window starting at `s` became tombstones (negative: tombstones left it
-- with the entries around them).
local function win_tombs(lane, s, k)
  redis.call('HINCRBY', wtombs_key(lane), win_member(s), k)
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
-- Sets the tombstone bit of sequence number `s` (head `h`, base `b`). Once the bits of entries
-- already passed (below `h`) fill 4 KiB, they are cut off the bitmap's front first and the
-- base moves up by as many: the bitmap then spans the lane, not its history.
local function lane_mark(L, s, h, b)
  local stale = math.floor((h - b) / 8)
  if stale >= 4096 then
    local rest = redis.call('GETRANGE', L.gone, stale, -1)
    if rest == '' then
      redis.call('DEL', L.gone)
    else
      redis.call('SET', L.gone, rest)
    end
    b = b + 8 * stale
    redis.call('HSET', L.meta, 'b', b)
  end
  redis.call('SETBIT', L.gone, s - b, 1)
end
-- Takes job `id` out of the lane: its entry becomes a tombstone, marked gone, that waits for
-- a claim, and its index entry goes. Returns its record, or nil when the lane does not hold it.
local function lane_drop(L, id)
  local kind, rec, s, h, b = lane_find(L, id)
  if not kind then return nil end
  if kind == 'W' then
    -- (s: the window's start, h: the place in it.)
    redis.call('LSET', win_key(L.lane, s), h, '\0')
    win_tombs(L.lane, s, 1)
    redis.call('HINCRBY', L.meta, 'wn', -1)
  else
    lane_mark(L, s, h, b)
    redis.call('LSET', L.lane, s - h, lane_tomb(rec_due(rec)))
  end
  redis.call('HDEL', L.ix, id)
  return rec
end
-- Moves the lane's job `id` to `jobs` and `sched` (same record, same due time), where every
-- path that changes a job by id finds it; false when the lane does not hold it.
local function lane_pull(L, jobs, sched, id)
  local rec = lane_drop(L, id)
  if not rec then return false end
  redis.call('HSET', jobs, id, rec)
  redis.call('ZADD', sched, rec_due(rec), id)
  return true
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
-- Arguments: id, mode (1 | 2 | 3: how `t` is read), t (ms).
-- Returns coded{ code, value }: 1 and the new due time (ms), or -4 / -5 /
-- -1 (nothing changed).
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
  return coded{ code = 1, value = due }
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
return coded{ code = 1, value = due }
