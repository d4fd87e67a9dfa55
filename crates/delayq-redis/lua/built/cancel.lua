-- delayq script; constants from Rust written in (scripts.rs)
-- cancel.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local lease = KEYS[2]
local jobs = KEYS[3]
local dead = KEYS[4]
local ready = KEYS[5]
local lane = KEYS[6]
local lanemeta = KEYS[7]
local lanegone = KEYS[8]
local bm = KEYS[9]
local stat = KEYS[10]
local wake = KEYS[11]
local kinfl = KEYS[12]
local kwait = KEYS[13]
local cxl = KEYS[14]
local kj = KEYS[15]
local waiting = KEYS[16]
local ix_n = tonumber(ARGV[2])
local ix_at = 17 -- ix: KEYS[ix_at] .. KEYS[ix_at + ix_n - 1]
local id = ARGV[3]
local running = (ARGV[4] == '1')
local rec_fixed, rec_extra, call_chunked, rec_batch, batch_end, batch_count, dep_end, dep_prefix, dep_post, rec_kp, key_unindex, key_unpark, key_ended, key_free
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
local function rec_due(rec)
  return (struct.unpack('>I6', rec, 7))
end
-- The reply code refusing an operation on a job in state `st` (nil: missing).
local function refusal(st)
  if st == 0 then return -3 end
  if st == 1 then return -4 end
  if st == 2 then return -5 end
  return -1
end
-- Slots were freed (an ack, nack or release): wakes the consumers a full max_in_flight held
-- back, if any (`flags`: the byte at 1 when the caller has read it).
local function limit_freed(stat, wake, flags)
  flags = flags or string.byte(redis.call('GETRANGE', stat, 1, 1)) or 0
  if bit.band(flags, 2) ~= 0 then
    redis.call('BITFIELD', stat, 'SET', 'u8', 1 * 8, flags - 2)
    redis.call('PUBLISH', wake, 0)
  end
end

-- Priorities (delayq::NewJob::priority): a queue that has had a job with a priority (the byte
-- at 1 has 8) keeps its due jobs in `ready`, scored by due time minus
-- 60000 per priority level: claims take the lowest score first, so a higher
-- priority goes first and a job gains a level for every 60000 it waits (none
-- starves). A job enters `ready` when it is due (promote), never before.
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

-- cancel.lua: removes a scheduled job — and with `running` a leased one, ended cancelled at
-- once; reports what it found otherwise.
-- Keys (declared in transitions/cancel.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- dead      ZSET id -> failed_at ms
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard (batch.lua): a job that ends is counted there
-- stat      STRING paused flag, limits and series (common.lua; `running` only: the flags)
-- wake      channel of the queue's consumers (`running` only: a freed max_in_flight or key slot)
-- kinfl     HASH key -> its jobs leased (keyed.lua: key_free; `running` only)
-- kwait     ZSET key -> when a parked job comes back (keyed.lua; `running` only)
-- cxl       ZSET `<token>:<id>` -> until when (ms) the cancelled lease answers `cancelled`
-- kj        prefix of `kj:<key>`, each key's jobs (keyed.lua: key_unindex): a cancelled keyed
--           job leaves it
-- waiting   ZSET id -> due_ms: jobs waiting for their dependencies (cancelled like scheduled ones)
-- ix        (tail; a queue with a lane only) the id's index bucket `ix:<b>`
-- Arguments: id, running (1: a leased job is cancelled too).
-- Returns 1 (this call removed a scheduled job) | 6 (this call ended a leased job
-- cancelled: its record and lease are gone, its batch counts it cancelled, its key's and the
-- queue's in-flight slots are free, and `cxl` remembers its lease until an hour past the
-- lease's deadline so that the lease's extend, ack and nack answer `cancelled`) | -4
-- (without `running`) | -5 | -1 (nothing changed).
-- A lane job's entry stays in the lane as a tombstone of its due time, its bit set in
-- lanegone, until a claim passes it.
-- Safe to run twice: the second run finds nothing and answers -1 (a leased job's
-- second run too: its lease is gone; `cxl` still answers its worker).
local raw, deadline, code = nil, nil, nil
if redis.call('ZREM', sched, id) == 1 or redis.call('ZREM', ready, id) == 1
  or redis.call('ZREM', waiting, id) == 1 then
  raw = redis.call('HGET', jobs, id)
  redis.call('HDEL', jobs, id)
  code = 1
elseif running then
  deadline = redis.call('ZSCORE', lease, id)
  raw = deadline and redis.call('HGET', jobs, id)
  if raw then
    redis.call('ZREM', lease, id)
    redis.call('HDEL', jobs, id)
    code = 6
  end
end
if code then
  local now = now_ms()
  if raw and has(string.byte(raw, 2), 64) then
-- Where the optional section after the timeout starts in a raw record of flags `flags` (the
-- expiry, else the extras): the lease, backoff and timeout sections skipped by their fixed
-- widths, without decoding them.
rec_fixed = function(flags)
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
rec_extra = function(raw, want, also)
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
-- Runs `cmd key a1 a2 ...` over a flat list in chunks (Lua's unpack limit is ~8000 values).
call_chunked = function(cmd, key, list)
  local step = 2000
  for i = 1, #list, step do
    local j = math.min(i + step - 1, #list)
    redis.call(cmd, key, unpack(list, i, j))
  end
end
-- The batch of the raw record `raw` ('' for none), read from its extras without decoding
-- the rest.
rec_batch = function(raw)
  local at, len = rec_extra(raw, 19)
  if not at then return '' end
  return string.sub(raw, at, at + len - 1)
end
-- Job `id` (its record `raw`, as it was before it ended) ended as `how` — 'o' acked, 'd'
-- dead, 'c' cancelled — with `result` (an ack's, or nil): noted in `acc` (batch -> its ends in
-- this call), counted by batch_count at the end of the script.
batch_end = function(acc, raw, id, how, result)
  local b = rec_batch(raw)
  if b == '' then return end
  local a = acc[b]
  if not a then
    a = { ids = {}, hows = {}, results = {} }
    acc[b] = a
  end
  local n = #a.ids + 1
  a.ids[n] = id
  a.hows[n] = how
  a.results[n] = result or false
end
-- Counts the ends noted in `acc` (batch_end) in their batches' `bm:<batch>` hashes of a queue
-- of prefix `bm`, a batch at a time (one read, one write and the counts, whatever the number
-- of its jobs): only a job still pending changes, so each job is counted once. When the
-- batch keeps results, an acked job's result goes to `bmr:<batch>` (HASH id -> result) while
-- the shard's kept results stay within what a callback carries (1000 results,
-- 1048576 bytes: `\0rn`, `\0rb` in `bm:<batch>`); past that it is only counted
-- (`\0rl`, left out), so a batch costs what its callback carries. A batch left with no
-- pending job in this shard is marked in `bm!` (ZSET batch -> `now`), where the sweeps look
-- first (batch_ready.lua).
batch_count = function(bm, acc, now)
  for b, a in pairs(acc) do
    local k = bm .. ':' .. b
    local kr = redis.call('HMGET', k, '\0R', '\0rn', '\0rb')
    local keep, kn, kb, left = kr[1], tonumber(kr[2] or 0), tonumber(kr[3] or 0), 0
    local set, kept, n, total = {}, {}, { o = 0, d = 0, c = 0 }, 0
    for i = 1, #a.ids, 1000 do
      local st = redis.call('HMGET', k, unpack(a.ids, i, math.min(i + 999, #a.ids)))
      for j = 1, #st do
        local x = i + j - 1
        if st[j] == 'p' then
          local id, how, r = a.ids[x], a.hows[x], a.results[x]
          set[#set + 1] = id
          set[#set + 1] = how
          n[how] = n[how] + 1
          total = total + 1
          if keep and r and r ~= '' then
            if kn < 1000 and kb + #r <= 1048576 then
              kn, kb = kn + 1, kb + #r
              kept[#kept + 1] = id
              kept[#kept + 1] = r
            else
              left = left + 1
            end
          end
        end
      end
    end
    if total > 0 then
      call_chunked('HSET', k, set)
      for how, c in pairs(n) do
        if c > 0 then redis.call('HINCRBY', k, '\0' .. how, c) end
      end
      if #kept > 0 then
        call_chunked('HSET', bm .. 'r:' .. b, kept)
        redis.call('HSET', k, '\0rn', kn, '\0rb', kb)
      end
      if left > 0 then redis.call('HINCRBY', k, '\0rl', left) end
      if redis.call('HINCRBY', k, '\0p', -total) <= 0 then
        redis.call('ZADD', bm .. '!', now, b)
      end
    end
  end
end
    local bacc = {}
    batch_end(bacc, raw, id, 'c')
    batch_count(bm, bacc, now)
  end
  if raw and has(string.byte(raw, 2), 64) then
-- Where the optional section after the timeout starts in a raw record of flags `flags` (the
-- expiry, else the extras): the lease, backoff and timeout sections skipped by their fixed
-- widths, without decoding them.
rec_fixed = function(flags)
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
rec_extra = function(raw, want, also)
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
-- Job `id` (raw record `raw`, as it was before it ended) ended as `how` ('o' acked, 'd' dead,
-- 'c' cancelled) with `result` (nil: none): noted in `acc` when jobs wait for it (21),
-- and its own dependency state forgotten when it waited itself (20) — for dep_post.
dep_end = function(acc, raw, id, how, result)
  if not has(string.byte(raw, 2), 64) then return end
  if rec_extra(raw, 21) then acc[#acc + 1] = { id = id, how = how, result = result } end
  if rec_extra(raw, 20) then
    acc.forget = acc.forget or {}
    acc.forget[#acc.forget + 1] = id
  end
end
-- The prefix of this shard's keys (`dq:{q}:`), from one of them (`jobs`).
dep_prefix = function(jobs)
  return string.sub(jobs, 1, -5)
end
-- Posts the ends noted in `acc` (dep_end) to the outbox of this shard (`jobs` names it): one
-- entry per waiter of each, its waiters then forgotten; the dependency state of the ended
-- dependents goes. Returns how many entries it posted (the caller's reply says so: the
-- backend delivers them).
dep_post = function(jobs, acc, now)
  local P = dep_prefix(jobs)
  local xq = string.match(P, '{([^}#]*)')
  local posted = 0
  for _, e in ipairs(acc) do
    local w = redis.call('HGETALL', P .. 'dw:' .. e.id)
    if #w > 0 then
      redis.call('DEL', P .. 'dw:' .. e.id)
      for i = 1, #w, 2 do
        local m = w[i] .. '\0' .. xq .. '\0' .. e.id .. '\0' .. e.how
        redis.call('ZADD', P .. 'dout', now, m)
        if w[i + 1] == 'r' and e.result and e.result ~= '' then
          redis.call('HSET', P .. 'doutr', m, e.result)
        end
        posted = posted + 1
      end
    end
  end
  if acc.forget then
    for _, id in ipairs(acc.forget) do redis.call('DEL', P .. 'dg:' .. id) end
  end
  return posted
end
-- The key ('' for a job without one) and priority of the raw record `raw`, read from its
-- extras without decoding the rest. Both writers (encode, record.rs) put 1 first, so
-- a key found first means no priority.
rec_kp = function(raw)
  local key, prio = '', 5
  local at, len, tag = rec_extra(raw, 18, 1)
  if tag == 1 then
    prio = string.byte(raw, at)
    at, len = rec_extra(raw, 18)
  end
  if at then key = string.sub(raw, at, at + len - 1) end
  return key, prio
end
-- Job `id` (raw record `raw`) left the store: out of its key's index, if it has a key.
key_unindex = function(kj, raw, id)
  local k = rec_kp(raw)
  if k ~= '' then redis.call('ZREM', kj .. ':' .. k, id) end
end
    key_unindex(kj, raw, id)
    -- Jobs waiting for it hear of it (deps.lua).
    local dacc = {}
    dep_end(dacc, raw, id, 'c')
    if #dacc > 0 or dacc.forget then dep_post(jobs, dacc, now) end
  end
  if code == 6 then
    local lflags = string.byte(redis.call('GETRANGE', stat, 1, 1)) or 0
    if bit.band(lflags, 32) ~= 0 then
-- Where the optional section after the timeout starts in a raw record of flags `flags` (the
-- expiry, else the extras): the lease, backoff and timeout sections skipped by their fixed
-- widths, without decoding them.
rec_fixed = function(flags)
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
rec_extra = function(raw, want, also)
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
-- Runs `cmd key a1 a2 ...` over a flat list in chunks (Lua's unpack limit is ~8000 values).
call_chunked = function(cmd, key, list)
  local step = 2000
  for i = 1, #list, step do
    local j = math.min(i + step - 1, #list)
    redis.call(cmd, key, unpack(list, i, j))
  end
end
-- The key ('' for a job without one) and priority of the raw record `raw`, read from its
-- extras without decoding the rest. Both writers (encode, record.rs) put 1 first, so
-- a key found first means no priority.
rec_kp = function(raw)
  local key, prio = '', 5
  local at, len, tag = rec_extra(raw, 18, 1)
  if tag == 1 then
    prio = string.byte(raw, at)
    at, len = rec_extra(raw, 18)
  end
  if at then key = string.sub(raw, at, at + len - 1) end
  return key, prio
end
-- Brings key `k`'s first `n` parked jobs back to their turns in `ready`; returns how many
-- did. An entry whose job left `ready` meanwhile (cancelled, rescheduled) is dropped.
key_unpark = function(kwait, ready, k, n)
  local parked = kwait .. ':' .. k
  local h = redis.call('ZRANGE', parked, 0, n - 1, 'WITHSCORES')
  if #h == 0 then return 0 end
  local ids, back = {}, 0
  for i = 1, #h, 2 do
    ids[#ids + 1] = h[i]
    back = back + redis.call('ZADD', ready, 'XX', 'CH', h[i + 1], h[i])
  end
  call_chunked('ZREM', parked, ids)
  return back
end
-- A leased job (raw record `raw`) ended its lease (acked, failed, released, expired): counts
-- it under its key in `ended` (key -> jobs), for key_free.
key_ended = function(ended, raw)
  local k = rec_kp(raw)
  if k ~= '' then ended[k] = (ended[k] or 0) + 1 end
end
-- The leases counted in `ended` (key_ended) are over: each key has that many jobs less in
-- flight, and as many of its parked jobs go back to their turns — one call per key, however
-- many of its jobs ended. Returns whether any came back (the caller wakes consumers).
key_free = function(kinfl, kwait, ready, ended)
  local back = false
  for k, n in pairs(ended) do
    if redis.call('HINCRBY', kinfl, k, -n) <= 0 then redis.call('HDEL', kinfl, k) end
    if key_unpark(kwait, ready, k, n) > 0 then back = true end
  end
  return back
end
      local ended = {}
      key_ended(ended, raw)
      if key_free(kinfl, kwait, ready, ended) then redis.call('PUBLISH', wake, 0) end
    end
    limit_freed(stat, wake, lflags)
    -- The leases whose time is up are forgotten (a few a call; the commands of the one ACL
    -- rule, docs/GUIDE.md).
    local old = redis.call('ZRANGEBYSCORE', cxl, '-inf', now, 'LIMIT', 0, 100)
    if #old > 0 then redis.call('ZREM', cxl, unpack(old)) end
    redis.call('ZADD', cxl, tonumber(deadline) + 3600000,
      string.format('%d', rec_token(raw)) .. ':' .. id)
  end
  return code
end
if ix_n > 0 then
  local L = { lane = lane, meta = lanemeta, gone = lanegone, ix = KEYS[ix_at] }
  if lane_drop(L, id) then return 1 end
end
return refusal(state_of(sched, lease, dead, id, ready))
