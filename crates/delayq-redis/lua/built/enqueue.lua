-- delayq script; constants from Rust written in (scripts.rs)
-- enqueue.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local jobs = KEYS[2]
local wake = KEYS[3]
local stat = KEYS[4]
local ready = KEYS[5]
local done = KEYS[6]
local lane = KEYS[7]
local lanemeta = KEYS[8]
local lanegone = KEYS[9]
local kj = KEYS[10]
local ix_n = tonumber(ARGV[2])
local ix_at = 11 -- ix: KEYS[ix_at] .. KEYS[ix_at + ix_n - 1]
local batch_n = (#ARGV - 2) / 2
local batch_id, batch_spec = {}, {}
for i = 1, batch_n do local a = 3 + (i - 1) * 2 batch_id[i] = ARGV[a + 0] batch_spec[i] = ARGV[a + 1] end
local function push_enqueued(list, code, due) list[#list + 1] = code list[#list + 1] = due end
local lane_entry, lane_dead, lane_due, lane_tomb, lane_hb, win_member, win_key, wins_key, wtombs_key, ix_entry, win_width, win_entry, win_tombs, lane_find, lane_mark, lane_drop, lane_pull, lane_first_due
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
-- Fast accessors of the fixed header.
local function rec_token(rec)
  return (struct.unpack('>I6', rec, 19))
end
local function rec_attempt(rec)
  return (struct.unpack('>H', rec, 3))
end
local function rec_due(rec)
  return (struct.unpack('>I6', rec, 7))
end
-- The record with a new attempt count and lease token, everything else unchanged.
local function rec_claimed(rec, attempt, token)
  return string.sub(rec, 1, 3 - 1) .. struct.pack('>H', attempt)
    .. string.sub(rec, 3 + 2, 19 - 1) .. struct.pack('>I6', token)
    .. string.sub(rec, 24 + 1)
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
-- Runs `cmd key a1 a2 ...` over a flat list in chunks (Lua's unpack limit is ~8000 values).
local function call_chunked(cmd, key, list)
  local step = 2000
  for i = 1, #list, step do
    local j = math.min(i + step - 1, #list)
    redis.call(cmd, key, unpack(list, i, j))
  end
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
-- The key ('' for a job without one) and priority of the raw record `raw`, read from its
-- extras without decoding the rest. Both writers (encode, record.rs) put 1 first, so
-- a key found first means no priority.
local function rec_kp(raw)
  local key, prio = '', 5
  local at, len, tag = rec_extra(raw, 18, 1)
  if tag == 1 then
    prio = string.byte(raw, at)
    at, len = rec_extra(raw, 18)
  end
  if at then key = string.sub(raw, at, at + len - 1) end
  return key, prio
end
-- Notes job `id` of key `k` in `add` (key -> ids), for key_index_write.
local function key_index_add(add, k, id)
  local l = add[k]
  if not l then
    l = {}
    add[k] = l
  end
  l[#l + 1] = 0
  l[#l + 1] = id
end
-- Adds the jobs noted in `add` (key_index_add) to their keys' indexes: one ZADD per key.
local function key_index_write(kj, add)
  for k, l in pairs(add) do call_chunked('ZADD', kj .. ':' .. k, l) end
end

-- enqueue.lua: adds jobs that do not exist yet; reports existing ids without touching them.
-- Keys (declared in transitions/enqueue.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- jobs      HASH id -> record
-- wake      channel of the queue's consumers
-- stat      STRING paused flag and series of counts (common.lua: count)
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
--           (a job with a priority marks the queue: 8)
-- done      ZSET id -> when its retention ends: completed jobs kept as done
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- kj        STRING the key index is whole; `kj:<key>` ZSET each key's jobs (keyed.lua, above
--           key_index_add): a keyed job written is added there
-- ix        (tail; a queue with a lane only) the index bucket `ix:<b>` of each job, in order
-- Arguments: the tail `batch` of (id, spec): the spec is the whole record as the client builds
--   it (record.rs `spec`) after one byte of flags — when (1 | 2 | 3),
--   plus 4 to replace an existing scheduled job — with its due field holding the
--   schedule's time (a delay or an absolute ms; 0 for 1) and created 0: the script
--   writes both from its clock (two arguments per job: a batch's cost in Redis is mostly per
--   argument and per call)
-- Returns a list of (code, due_ms) per job in order (push_enqueued): 1 (created) | 4 (nothing written) |
--   5 (a scheduled job replaced: new payload, due time and options, created now; it
--   keeps its attempts) | -6 (done and kept, within its dedupe window: nothing written; past
--   the window the id is free and the job is created) | -4 / -5 (replace refused: the job is there), and the
--   job's due time after the call. An id twice in one batch: the first is written.
-- A batch reads every id with one HMGET and writes the new records with one HSET (chunked); a
-- single job uses HSETNX, one command fewer.
-- The lane (bucket keys given and the queue's 16 flag set): a new job without a priority
-- or a key (a keyed job is found through its key's index, which holds ids in `jobs`) whose
-- due time is not earlier than the lane's last goes to the lane (RPUSH, its index
-- entry); with time windows (the u16 at 2 of `stat`), one due in a window that starts
-- more than a width from now and is not full goes to that window (lane.lua: win_key; its
-- index entry, and a window's length and push, once a window a call; the windows' count once
-- a call; a new window is added to `<lane>:w`, with a wake-up when it is the first); any
-- other to `jobs` and `sched`. A replace first moves a lane job out (lane_pull).
-- Safe to run twice: a second run finds every job of the first (HMGET / HSETNX / the lane's
-- index) and answers
-- 4 with the stored due time (and counts nothing: only created jobs are counted); a
-- replace run twice writes the same record twice (a relative due time moves by the time
-- between the runs, as a second debounce would).
-- A full store (`maxmemory`, noeviction) refuses the first write of a script: the new records'
-- HSET / HSETNX is called with pcall so a batch of ids that all exist still answers 4
-- (nothing to write); otherwise the OOM error is returned and nothing was written (later writes
-- of a script that has written once are never refused).
local now = now_ms()
local n = batch_n
local out = {}
local earliest = nil
local zadd = {}
local fresh = {}
local created = 0
local prio = false
-- A job written with a key marks the queue (32; keyed.lua) and goes to its key's index
-- (kadd: key -> ids, keyed.lua: key_index_add).
local keyed = false
local kadd = nil
-- The lane, when this queue has one (lane.lua: lane_find); L.ix is set per job.
local L = nil
-- The lane's length and next sequence number when the script began, its last due time, the
-- entries to push and the first one's due time.
local lane_len, lane_next, lane_tail, lane_push, lane_first = 0, 0, nil, {}, nil
-- The window width (0: none), each window's length as pushed so far, its entries to push
-- and the windows in the order first pushed to.
local W, wlen, wpush, worder = 0, {}, {}, {}
if ix_n > 0 then
  -- The lane's helpers, defined only for a queue with a lane (scripts.rs: DEFINE).
-- The id and the record of a lane entry.
lane_entry = function(e)
  local n = string.byte(e, 1)
  return string.sub(e, 2, 1 + n), string.sub(e, 2 + n)
end
-- Whether a lane entry is a cancelled job's tombstone.
lane_dead = function(e)
  return string.byte(e, 1) == 0
end
-- The due time of a lane entry (or a tombstone), without copying its record.
lane_due = function(e)
  local n = string.byte(e, 1)
  if n == 0 then return (struct.unpack('>I6', e, 2)) end
  return (struct.unpack('>I6', e, 2 + n + 7 - 1))
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
-- The ZSET of the windows' starts.
wins_key = function(lane)
  return lane .. ':w'
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
-- The window width from `raw` (bytes of `stat` read from offset `from` to 2 + 1 at
-- least): 0 when the queue has none (or the string is shorter: never set).
win_width = function(raw, from)
  local at = 2 - from + 1
  if #raw < at + 1 then return 0 end
  return (struct.unpack('>H', raw, at))
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
-- The due time of the lane's first entry, or nil when it is empty.
lane_first_due = function(lane)
  local e = redis.call('LINDEX', lane, 0)
  return e and lane_due(e)
end
  local fw = redis.call('GETRANGE', stat, 1, 2 + 1)
  local f = string.byte(fw) or 0
  if bit.band(f, 16) ~= 0 then
    W = win_width(fw, 1)
    L = { lane = lane, meta = lanemeta, gone = lanegone }
    for i = 1, n do
      if string.byte(batch_spec[i], 1) >= 4 then
        L.ix = KEYS[ix_at + i - 1]
        lane_pull(L, jobs, sched, batch_id[i])
      end
    end
    lane_len = redis.call('LLEN', L.lane)
    local m = redis.call('HMGET', L.meta, 'h', 't')
    lane_next = tonumber(m[1] or 0) + lane_len
    if lane_len > 0 then lane_tail = tonumber(m[2]) end
  end
end
-- The stored records of a batch (false: none), read at once.
local stored_all = nil
if n > 1 or L then
  local ids = batch_id
  stored_all = {}
  for i = 1, n, 2000 do
    local got = redis.call('HMGET', jobs, unpack(ids, i, math.min(i + 1999, n)))
    for j = 1, #got do stored_all[i + j - 1] = got[j] end
  end
end
local new = {}
for i = 0, n - 1 do
  local id, spec = batch_id[i + 1], batch_spec[i + 1]
  local due = fresh[id]
  if due == nil then
    local mode = string.byte(spec, 1)
    -- 4 is the flags byte's highest bit (record.rs).
    local replace = mode >= 4
    due = due_from(mode, struct.unpack('>I6', spec, 1 + 7), now)
    local rec = string.sub(spec, 2, 7) .. struct.pack('>I6I6', due, now)
      .. string.sub(spec, 1 + 19)
    local set, stored = 0, nil
    local in_lane = nil
    if stored_all then
      stored = stored_all[i + 1]
      if not stored and L and not replace and #id <= 255 then
        L.ix = KEYS[ix_at + i]
        local plain = true
        if has(string.byte(rec, 2), 64) then
          local k = rec_kp(rec)
          plain = k == '' and not decode(rec).prio
        end
        local fits = plain and (lane_tail == nil or due >= lane_tail)
        -- Else its window's start, when it goes to one.
        local ws = nil
        if not fits and plain and W > 0 then
          local start = due - due % W
          if start > now + W then
            if wlen[start] == nil then wlen[start] = redis.call('LLEN', win_key(L.lane, start)) end
            if wlen[start] < 8192 then ws = start end
          end
        end
        -- Its index entry: the lane's sequence number, or the window's start and place.
        local val = nil
        if fits then
          val = 'L' .. lane_next
        elseif ws then
          val = 'W' .. struct.pack('>I6I3', ws, wlen[ws])
        end
        -- A new id takes its index entry at once (HSETNX: one call); an id the index has is
        -- looked at (lane_find), its entry replaced when it is one left behind.
        local s, lrec = nil, nil
        if not (val and redis.call('HSETNX', L.ix, id, val) == 1) then
          s, lrec = lane_find(L, id)
          if not s and val then redis.call('HSET', L.ix, id, val) end
        end
        if s then
          in_lane = rec_due(lrec)
        elseif ws then
          if not wpush[ws] then
            wpush[ws] = {}
            worder[#worder + 1] = ws
          end
          local b = tonumber(string.match(L.ix, '(%d+)$'))
          local p = wpush[ws]
          p[#p + 1] = string.char(#id) .. id .. struct.pack('>H', b) .. rec
          wlen[ws] = wlen[ws] + 1
          fresh[id] = due
          created = created + 1
          in_lane = false
        elseif fits then
          lane_push[#lane_push + 1] = string.char(#id) .. id .. rec
          lane_first = lane_first or due
          lane_next = lane_next + 1
          lane_tail = due
          fresh[id] = due
          created = created + 1
          in_lane = false
        end
      end
      if not stored and in_lane == nil then
        new[#new + 1] = id
        new[#new + 1] = rec
        set = 1
      end
    else
      set = redis.pcall('HSETNX', jobs, id, rec)
      if type(set) == 'table' then
        stored = redis.call('HGET', jobs, id)
        if not stored then return set end
        set = 0
      elseif set == 0 then
        stored = redis.call('HGET', jobs, id)
      end
    end
    local code = nil
    if in_lane ~= nil then
      -- In the lane: pushed now (false), or there already, due then.
      code = in_lane and 4 or 1
      if in_lane then due = in_lane end
      stored = nil
    end
    local was_done = stored and set == 0 and has(string.byte(stored, 2), 128)
    if was_done and decode(stored).dedupe_until <= now then
      -- A job kept as done whose dedupe window is over: the id is free again (and no longer
      -- counted as done).
      redis.call('HSET', jobs, id, rec)
      redis.call('ZREM', done, id)
      set = 1
    end
    local written = set == 1
    if set == 1 then
      zadd[#zadd + 1] = due
      zadd[#zadd + 1] = id
      fresh[id] = due
      created = created + 1
      if earliest == nil or due < earliest then earliest = due end
      code = 1
    elseif was_done then
      -- Done within its dedupe window: refused, the original outcome answered.
      due = rec_due(stored)
      code = -6
    elseif in_lane ~= nil then
      -- answered above
    elseif replace then
      -- Replace: only a scheduled job.
      if redis.call('ZSCORE', sched, id) or redis.call('ZREM', ready, id) == 1 then
        wake_if_earlier(sched, wake, due)
        redis.call('HSET', jobs, id, rec_claimed(rec, rec_attempt(stored), 0))
        redis.call('ZADD', sched, due, id)
        written = true
        code = 5
      else
        -- Not scheduled: leased exactly while its record carries a token, else dead.
        due = rec_due(stored)
        code = rec_token(stored) ~= 0 and -4 or -5
      end
    else
      due = rec_due(stored)
      code = 4
    end
    if written and has(string.byte(rec, 2), 64) then
      if not prio then prio = decode(rec).prio ~= nil end
      local k = rec_kp(rec)
      if k ~= '' then
        keyed = true
        kadd = kadd or {}
        key_index_add(kadd, k, id)
      end
    end
    push_enqueued(out, code, due)
  else
    push_enqueued(out, 4, due)
  end
end
if #lane_push > 0 then
  if lane_len == 0 then wake_if_earlier(sched, wake, lane_first) end
  local r = redis.pcall('RPUSH', L.lane, unpack(lane_push, 1, math.min(2000, #lane_push)))
  if type(r) == 'table' and r.err then return r end
  for i = 2001, #lane_push, 2000 do
    redis.call('RPUSH', L.lane, unpack(lane_push, i, math.min(i + 1999, #lane_push)))
  end
  redis.call('HSET', L.meta, 't', lane_tail)
end
if #worder > 0 then
  local wk, total, first_new = wins_key(L.lane), 0, nil
  for _, start in ipairs(worder) do
    local p = wpush[start]
    call_chunked('RPUSH', win_key(L.lane, start), p)
    if wlen[start] == #p then
      -- A new window (one of tombstones only still has them).
      redis.call('ZADD', wk, start, win_member(start))
      if not first_new or start < first_new then first_new = start end
    end
    total = total + #p
  end
  redis.call('HINCRBY', L.meta, 'wn', total)
  if first_new and tonumber(redis.call('ZRANGE', wk, 0, 0)[1]) == first_new then
    -- A new first window: consumers come back to move it one width before it starts.
    wake_if_earlier(sched, wake, first_new - W, lane_first_due(L.lane))
  end
end
if #new > 0 then
  -- The first write of a batch without replaced or recycled ids: refused whole by a full store.
  local r = redis.pcall('HSET', jobs, unpack(new, 1, math.min(4000, #new)))
  if type(r) == 'table' and r.err then return r end
  for i = 4001, #new, 4000 do
    redis.call('HSET', jobs, unpack(new, i, math.min(i + 3999, #new)))
  end
end
if prio or keyed then
  local f = string.byte(redis.call('GETRANGE', stat, 1, 1)) or 0
  local add = 0
  if prio and bit.band(f, 8) == 0 then add = add + 8 end
  if keyed and bit.band(f, 32) == 0 then
    -- The shard's first keyed job: its key index is whole from the start — unless the queue
    -- has a lane, which may hold keyed jobs of an earlier build (lane.lua: key_indexed).
    add = add + 32
    if not L then redis.call('SET', kj, '1') end
  end
  if add > 0 then redis.call('BITFIELD', stat, 'SET', 'u8', 1 * 8, f + add) end
end
if kadd then key_index_write(kj, kadd) end
if earliest ~= nil then
  wake_if_earlier(sched, wake, earliest, L and lane_first_due(L.lane))
  call_chunked('ZADD', sched, zadd)
end
if created > 0 then count(stat, now, 0, created) end
return out
