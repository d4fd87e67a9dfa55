-- delayq script; constants from Rust written in (scripts.rs)
-- dep_watch.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local jobs = KEYS[2]
local dead = KEYS[3]
local lane = KEYS[4]
local lanemeta = KEYS[5]
local lanegone = KEYS[6]
local ix_n = tonumber(ARGV[2])
local ix_at = 7 -- ix: KEYS[ix_at] .. KEYS[ix_at + ix_n - 1]
local watch_n = (#ARGV - 2) / 3
local watch_id, watch_waiter, watch_mode = {}, {}, {}
for i = 1, watch_n do local a = 3 + (i - 1) * 3 watch_id[i] = ARGV[a + 0] watch_waiter[i] = ARGV[a + 1] watch_mode[i] = ARGV[a + 2] end
local function push_dep_state(list, how, result) list[#list + 1] = how list[#list + 1] = result end
local rec_due, lane_entry, lane_dead, lane_tomb, lane_hb, win_member, win_key, wtombs_key, ix_entry, win_entry, win_tombs, lane_find, lane_mark, lane_drop, lane_pull
local function has(flags, f)
  return bit.band(flags, f) ~= 0
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
-- Where the optional section after the timeout starts in a raw record of flags `flags` (the
-- expiry, else the extras): the lease, backoff and timeout sections skipped by their fixed
-- widths, without decoding them.
local function rec_fixed(flags)
  local pos = 24 + 1
  if has(flags, 1) then pos = pos + 4 end
  if has(flags, 2) then pos = pos + 9 end
  if has(flags, 8) then pos = pos + 4 end
  return pos
end
-- The first extra of the raw record `raw` tagged `want` (or `also`, when given): where its
-- value starts, its length and its tag; nil when there is none. Read without decoding the
-- rest: 1 holds one byte, 2 and 3 six, every other extra (4, the
-- sized ones) a u16 length, then its bytes.
local function rec_extra(raw, want, also)
  local flags = string.byte(raw, 2)
  if not has(flags, 64) then return nil end
  local pos = rec_fixed(flags)
  if has(flags, 16) then pos = pos + 6 end
  local n = string.byte(raw, pos)
  pos = pos + 1
  for _ = 1, n do
    local tag = string.byte(raw, pos)
    local len, at = 1, pos + 1
    if tag == 2 or tag == 3 then
      len = 6
    elseif tag ~= 1 then
      len, at = struct.unpack('>H', raw, pos + 1), pos + 3
    end
    if tag == want or tag == also then return at, len, tag end
    pos = at + len
  end
  return nil
end
-- The prefix of this shard's keys (`dq:{q}:`), from one of them (`jobs`).
local function dep_prefix(jobs)
  return string.sub(jobs, 1, -5)
end

-- dep_watch.lua: registers a dependent as a waiter of dependencies in this shard, or says how
-- each already ended (deps.lua, at the top).
-- Keys (declared in transitions/dep_watch.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- jobs      HASH id -> record
-- dead      ZSET id -> failed_at ms
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- ix        (tail; a queue with a lane only) each dependency's index bucket `ix:<b>`, in order
-- Arguments: the tail `watch` of (id, waiter, mode): the dependency, the waiter's field
-- (`<its key prefix>\0<its id>`) and `r` when it wants the result (else `1`).
-- Returns per dependency, in order, push_dep_state(how, result): `p` (pending: the waiter is
-- registered in `dw:<id>` and the job marked 21), `o` (done or gone: ended well;
-- result: a done job's kept result when asked, else ''), `d` (dead).
-- A lane job moves to `jobs` and `sched` first (lane.lua: lane_pull), so its record can carry
-- the mark.
-- Safe to run twice: the waiter is set again (a hash field), the mark found.
local out = {}
for i = 1, watch_n do
  local id, waiter, mode = watch_id[i], watch_waiter[i], watch_mode[i]
  local raw = redis.call('HGET', jobs, id)
  if not raw and ix_n > 0 then
rec_due = function(rec)
  return (struct.unpack('>I6', rec, 7))
end
-- The id and the record of a lane entry.
lane_entry = function(e)
  local n = string.byte(e, 1)
  return string.sub(e, 2, 1 + n), string.sub(e, 2 + n)
end
-- Whether a lane entry is a cancelled job's tombstone.
lane_dead = function(e)
  return string.byte(e, 1) == 0
end
-- What a cancelled entry keeps of its job: its due time (7 bytes instead of the whole job; no
-- id has length 0, so lane_find never takes it for a job).
lane_tomb = function(due)
  return '\0' .. struct.pack('>I6', due)
end
-- The lane's head sequence number and the sequence number of bit 0 of `lanegone`.
lane_hb = function(meta)
  local v = redis.call('HMGET', meta, 'h', 'b')
  return tonumber(v[1] or 0), tonumber(v[2] or 0)
end
-- A window's start as its member of `<lane>:w`, its field of `<lane>:t` and its key's suffix
-- (`s`: a number or the member string).
win_member = function(s)
  return string.format('%.0f', s)
end
-- The LIST of the window that starts at `s`.
win_key = function(lane, s)
  return lane .. ':' .. win_member(s)
end
-- The HASH start -> tombstones of each window that has any.
wtombs_key = function(lane)
  return lane .. ':t'
end
-- What an index entry `v` points at, tagged by its first byte (keys.rs `IndexEntry` writes
-- the same): 'L' and the one-delay lane's sequence number, or 'W' and the window's
-- start and place. An entry written before the tags (a decimal number, or the 9 bytes of start
-- and place, whose first byte is below '0') reads as the same kind.
-- Returns kind, a, b: 'L', sequence number, nil | 'W', start, place.
ix_entry = function(v)
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
win_entry = function(e)
  local n = string.byte(e, 1)
  return string.sub(e, 2, 1 + n), (struct.unpack('>H', e, 2 + n)), string.sub(e, 4 + n)
end
-- `k` entries of the window starting at `s` became tombstones (negative: tombstones left it
-- with the entries around them).
win_tombs = function(lane, s, k)
  redis.call('HINCRBY', wtombs_key(lane), win_member(s), k)
end
-- The lane entry of `id` (index bucket `ix`), or nil. Returns kind, rec, a, b, c: 'L',
-- its record, its sequence number, the lane's head sequence number and bitmap base (lane_hb)
-- | 'W', its record, the window's start, its place there, nil.
lane_find = function(L, id)
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
lane_mark = function(L, s, h, b)
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
lane_drop = function(L, id)
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
lane_pull = function(L, jobs, sched, id)
  local rec = lane_drop(L, id)
  if not rec then return false end
  redis.call('HSET', jobs, id, rec)
  redis.call('ZADD', sched, rec_due(rec), id)
  return true
end
    if lane_pull({ lane = lane, meta = lanemeta, gone = lanegone, ix = KEYS[ix_at + i - 1] },
      jobs, sched, id) then
      raw = redis.call('HGET', jobs, id)
    end
  end
  if not raw then
    push_dep_state(out, 'o', '')
  elseif has(string.byte(raw, 2), 128) then
    local result = ''
    if mode == 'r' then result = decode(raw).result or '' end
    push_dep_state(out, 'o', result)
  elseif redis.call('ZSCORE', dead, id) then
    push_dep_state(out, 'd', '')
  else
    redis.call('HSET', dep_prefix(jobs) .. 'dw:' .. id, waiter, mode)
    if not (has(string.byte(raw, 2), 64) and rec_extra(raw, 21)) then
      local r = decode(raw)
      r.sized = r.sized or {}
      r.sized[#r.sized + 1] = struct.pack('>BH', 21, 0)
      redis.call('HSET', jobs, id, encode(r))
    end
    push_dep_state(out, 'p', '')
  end
end
return out
