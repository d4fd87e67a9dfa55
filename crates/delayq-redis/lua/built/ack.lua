-- delayq script; constants from Rust written in (scripts.rs)
-- ack.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local lease = KEYS[1]
local jobs = KEYS[2]
local stat = KEYS[3]
local wake = KEYS[4]
local done = KEYS[5]
local lane = KEYS[6]
local lanemeta = KEYS[7]
local ready = KEYS[8]
local kinfl = KEYS[9]
local kwait = KEYS[10]
local bm = KEYS[11]
local cxl = KEYS[12]
local kj = KEYS[13]
local ix_n = tonumber(ARGV[2])
local ix_at = 14 -- ix: KEYS[ix_at] .. KEYS[ix_at + ix_n - 1]
local acks_n = (#ARGV - 2) / 3
local acks_id, acks_token, acks_result = {}, {}, {}
for i = 1, acks_n do local a = 3 + (i - 1) * 3 acks_id[i] = ARGV[a + 0] acks_token[i] = tonumber(ARGV[a + 1]) acks_result[i] = ARGV[a + 2] end
local lane_entry, lane_dead, lane_hb, win_member, win_key, ix_entry, win_entry, lane_find, rec_batch, batch_end, batch_count, rec_kp, key_unpark, key_ended, key_free, key_unindex
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
-- Runs `cmd key a1 a2 ...` over a flat list in chunks (Lua's unpack limit is ~8000 values).
local function call_chunked(cmd, key, list)
  local step = 2000
  for i = 1, #list, step do
    local j = math.min(i + step - 1, #list)
    redis.call(cmd, key, unpack(list, i, j))
  end
end
-- Retention (delayq::Retention): the queue's, when the byte at 1 has 4, from
-- the 16 bytes at 30440 of the `stat` string (keep_done_ms, dedupe_ms as doubles); nil else.
local function queue_retention(stat, lflags)
  if bit.band(lflags, 4) == 0 then return nil end
  local keep, dedupe = struct.unpack('>dd', redis.call('GETRANGE', stat, 30440, 30440 + 15))
  return { keep = keep, dedupe = dedupe }
end
-- Whether the raw record `raw` has a retention of its own (extra 2 or 3): an ack
-- deletes every other completed job of a queue without retention in one batch.
local function rec_keeps(raw)
  return rec_extra(raw, 2, 3) ~= nil
end
-- A completed job: deleted, or kept as done when its retention (its own, else the queue's
-- `ret`) says so — marked 128 with its completion time and the end of its dedupe window
-- (and `result`, when given, stored as its 17 extra),
-- indexed in `done` by when it may go. Returns whether it was kept.
local function keep_done(jobs, lease, done, id, raw, ret, now, result)
  local r = decode(raw)
  local keep = r.keep or (ret and ret.keep) or 0
  local dedupe = r.dedupe or (ret and ret.dedupe) or 0
  redis.call('ZREM', lease, id)
  if keep <= 0 and dedupe <= 0 then
    redis.call('HDEL', jobs, id)
    return false
  end
  r.token = 0
  if result then r.result = result end
  r.done_at = now
  r.dedupe_until = now + dedupe
  redis.call('HSET', jobs, id, encode(r))
  redis.call('ZADD', done, now + math.max(keep, dedupe), id)
  return true
end
-- A job was kept by its own retention on a queue without one (`ret` nil): the queue is marked
-- as retaining (4 with a zero retention: keeps nothing itself), so that later acks and
-- claims trim kept jobs whose time is up. A settings change without retention clears the mark;
-- the next job kept by its own sets it again.
local function mark_retains(stat)
  local f = redis.call('BITFIELD', stat, 'GET', 'u8', 1 * 8)[1]
  if bit.band(f, 4) ~= 0 then return end
  redis.call('SETRANGE', stat, 30440, struct.pack('>dd', 0, 0))
  redis.call('BITFIELD', stat, 'SET', 'u8', 1 * 8, f + 4)
end
-- Deletes up to 20 kept jobs whose retention is over (an entry whose id was
-- enqueued again since only leaves the index).
local function trim_done(jobs, done, now)
  local old = redis.call('ZRANGEBYSCORE', done, '-inf', now, 'LIMIT', 0, 20)
  for _, id in ipairs(old) do
    local raw = redis.call('HGET', jobs, id)
    if raw and has(string.byte(raw, 2), 128) then redis.call('HDEL', jobs, id) end
    redis.call('ZREM', done, id)
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
-- Whether the lease (`id`, `token`) was ended by a cancel with `running`, which `cxl`
-- remembers (cancel.lua): asked only about a lease whose job is missing (leased_raw,
-- ack_pairs), so a path that finds its lease pays nothing for it.
local function cancelled_lease(cxl, id, token)
  return token ~= 0 and redis.call('ZSCORE', cxl, string.format('%d', token) .. ':' .. id) ~= false
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
-- Job `id` (raw record `raw`, as it was before it ended) ended as `how` ('o' acked, 'd' dead,
-- 'c' cancelled) with `result` (nil: none): noted in `acc` when jobs wait for it (21),
-- and its own dependency state forgotten when it waited itself (20) — for dep_post.
local function dep_end(acc, raw, id, how, result)
  if not has(string.byte(raw, 2), 64) then return end
  if rec_extra(raw, 21) then acc[#acc + 1] = { id = id, how = how, result = result } end
  if rec_extra(raw, 20) then
    acc.forget = acc.forget or {}
    acc.forget[#acc.forget + 1] = id
  end
end
-- The prefix of this shard's keys (`dq:{q}:`), from one of them (`jobs`).
local function dep_prefix(jobs)
  return string.sub(jobs, 1, -5)
end
-- Posts the ends noted in `acc` (dep_end) to the outbox of this shard (`jobs` names it): one
-- entry per waiter of each, its waiters then forgotten; the dependency state of the ended
-- dependents goes. Returns how many entries it posted (the caller's reply says so: the
-- backend delivers them).
local function dep_post(jobs, acc, now)
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
-- Acknowledges `k` pairs (id, token), pair i `ids[i]`, `tokens[i]`: records of valid
-- leases are deleted — or, with a retention (the job's own extras, else `ret`: the queue's,
-- from queue_retention), kept as done in `done` (keep_done). Returns per pair 1, -2 or
-- -8 (a lease `cxl` remembers as cancelled while it ran) or -1 (nothing
-- changed), how many were kept, and the records read (pair i's before the ack, nil when
-- `jobs` had none: a keyed queue frees the keys of those acked).
-- `in_lane(i, id)`, when given: whether pair i's lane holds `id` (lane_find), asked only
-- about an id `jobs` does not hold. `results`, when given: pair i's handler result, kept
-- with a job kept as done (an empty string: none).
local function ack_pairs(jobs, lease, ids, tokens, k, done_key, ret, now, in_lane, results, cxl)
  local out, gone, kept = {}, {}, {}
  if k == 0 then
    return out, 0
  end
  local raws = redis.call('HMGET', jobs, unpack(ids))
  for i = 1, k do
    local token = tokens[i]
    local raw = raws[i]
    if not raw then
      if in_lane and in_lane(i, ids[i]) then
        out[i] = -2
      elseif cancelled_lease(cxl, ids[i], token) then
        out[i] = -8
      else
        out[i] = -1
      end
    elseif token ~= 0 and rec_token(raw) == token then
      if ret or (has(string.byte(raw, 2), 64) and rec_keeps(raw)) then
        kept[#kept + 1] = i
      else
        gone[#gone + 1] = ids[i]
      end
      out[i] = 1
    else
      out[i] = -2
    end
  end
  if #gone > 0 then
    call_chunked('HDEL', jobs, gone)
    call_chunked('ZREM', lease, gone)
  end
  local n = 0
  for _, i in ipairs(kept) do
    local result = results and results[i] ~= '' and results[i] or nil
    if keep_done(jobs, lease, done_key, ids[i], raws[i], ret, now, result) then n = n + 1 end
  end
  return out, n, raws
end

-- ack.lua: acknowledges leased jobs: their records are deleted, or kept as done when a
-- retention says so (common.lua: keep_done).
-- Keys (declared in transitions/ack.rs, which generates the locals):
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- stat      STRING paused flag, limits, retention and series of counts (common.lua)
-- wake      channel of the queue's consumers (woken when a full max_in_flight frees)
-- done      ZSET id -> when its retention ends (ms)
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- ready     ZSET a keyed queue's due jobs in turns (keyed.lua; only with 32: an acked
--           job's key frees a slot, which wakes consumers when a parked job comes back)
-- kinfl     HASH key -> its jobs leased (keyed.lua: key_free)
-- kwait     ZSET key -> when a parked job comes back; `kwait:<key>` its parked jobs
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard (batch.lua; only with
--           128): a job that ends is counted there
-- cxl       ZSET `<token>:<id>` -> until when: leases cancelled while they ran (cancel.lua)
-- kj        prefix of `kj:<key>`, each key's jobs (keyed.lua: key_unindex): an acked keyed job
--           leaves it
-- ix        (tail; a queue with a lane only) each ack's index bucket `ix:<b>`, in order
-- An acked job that others wait for posts its end to the outbox (deps.lua: dep_post).
-- Arguments: the tail `acks` of (id, token, result): result is the handler's result kept with
-- a job kept as done (delayq::Completion; empty: none).
-- Returns one code per pair: 1 (acked), -2 (the job exists under another lease or
-- none), -8 (cancelled while it ran), -1 (no such job); refused pairs change
-- nothing.
-- Safe to run twice: a second run finds the records gone (or done, with no token) and answers
-- -1 or -2, changing nothing (a client that resends after a lost reply reads either
-- as "done or cancelled").
-- The lane's helpers are defined only for a queue with a lane (scripts.rs: DEFINE).
local in_lane = nil
if ix_n > 0 then
-- The id and the record of a lane entry.
lane_entry = function(e)
  local n = string.byte(e, 1)
  return string.sub(e, 2, 1 + n), string.sub(e, 2 + n)
end
-- Whether a lane entry is a cancelled job's tombstone.
lane_dead = function(e)
  return string.byte(e, 1) == 0
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
  in_lane = function(i, id)
    return lane_find({ lane = lane, meta = lanemeta, ix = KEYS[ix_at + i - 1] }, id)
  end
end
local lflags = string.byte(redis.call('GETRANGE', stat, 1, 1)) or 0
local now = now_ms()
local ret = queue_retention(stat, lflags)
local out, kept, raws =
  ack_pairs(jobs, lease, acks_id, acks_token, acks_n, done, ret, now, in_lane, acks_result, cxl)
-- A batch queue's and a keyed queue's helpers are defined only when it is one (scripts.rs:
-- DEFINE); `bacc` notes the ends of batch jobs (batch.lua), counted at the end.
local batched = bit.band(lflags, 128) ~= 0
local bacc = batched and {} or nil
if batched then
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
end
local keyed = bit.band(lflags, 32) ~= 0
if keyed then
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
-- Job `id` (raw record `raw`) left the store: out of its key's index, if it has a key.
key_unindex = function(kj, raw, id)
  local k = rec_kp(raw)
  if k ~= '' then redis.call('ZREM', kj .. ':' .. k, id) end
end
end
local acked, ended = 0, {}
-- Ends of jobs that others wait for (deps.lua), posted to the outbox at the end.
local dacc = {}
for i = 1, #out do
  if out[i] == 1 then
    acked = acked + 1
    dep_end(dacc, raws[i], acks_id[i], 'o', acks_result[i])
    if keyed then
      key_ended(ended, raws[i])
      key_unindex(kj, raws[i], acks_id[i])
    end
    if batched then batch_end(bacc, raws[i], acks_id[i], 'o', acks_result[i]) end
  end
end
if keyed and key_free(kinfl, kwait, ready, ended) then redis.call('PUBLISH', wake, 0) end
if batched then batch_count(bm, bacc, now) end
if #dacc > 0 or dacc.forget then dep_post(jobs, dacc, now) end
if acked > 0 then
  count(stat, now, 1, acked)
  limit_freed(stat, wake, lflags)
end
if kept > 0 or ret then trim_done(jobs, done, now) end
if kept > 0 and not ret then mark_retains(stat) end
return out
