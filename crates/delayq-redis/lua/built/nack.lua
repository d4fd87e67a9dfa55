-- delayq script; constants from Rust written in (scripts.rs)
-- nack.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local lease = KEYS[2]
local jobs = KEYS[3]
local dead = KEYS[4]
local wake = KEYS[5]
local stat = KEYS[6]
local lane = KEYS[7]
local lanemeta = KEYS[8]
local ready = KEYS[9]
local kinfl = KEYS[10]
local kwait = KEYS[11]
local bm = KEYS[12]
local cxl = KEYS[13]
local ix_n = tonumber(ARGV[2])
local ix_at = 14 -- ix: KEYS[ix_at] .. KEYS[ix_at + ix_n - 1]
local id = ARGV[3]
local token = tonumber(ARGV[4])
local err = ARGV[5]
local retry_ms = tonumber(ARGV[6])
local dead_now = (ARGV[7] == '1')
local rnd = tonumber(ARGV[8])
local function coded(t) return { t.code, t.value } end
local call_chunked, rec_kp, key_unpark, key_ended, key_free, rec_batch, batch_end, batch_count
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
-- Delay before the retry after failed attempt `attempt`; rnd is uniform in [0, 1).
-- Mirrors delayq::Backoff::delay.
local function backoff_ms(r, attempt, rnd)
  local kind = r.bkind or 2
  local base = r.bbase or 1000
  local cap = r.bcap or 600000
  if kind == 0 then
    return base
  end
  local shift = attempt - 1
  if shift < 0 then shift = 0 end
  if shift > 62 then shift = 62 end
  local d = base * math.pow(2, shift)
  if d > cap then d = cap end
  if kind == 2 then
    d = math.floor(d / 2 + rnd * d / 2)
  end
  return d
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
-- Dead-letters a decoded record.
local function bury(jobs, dead, id, r, now)
  r.token = 0
  redis.call('HSET', jobs, id, encode(r))
  redis.call('ZADD', dead, now, id)
end

-- Throughput and lateness (delayq::series; late_bucket(ms), the 1-based lateness bucket of a
-- delay, is generated in the prelude from series.rs): the shard's `stat` string, read and written with
-- BITFIELD at fixed offsets (series.rs `layout`): the paused flag (a byte at 0), the
-- last interval counted in (u32 at 4), the totals of the intervals before it (20
-- i64 from 8) and a ring of 360 intervals of 84 bytes from 168: the
-- interval number (u32), then 20 counts (u32). Counter indexes: 0 enqueued,
-- 1 completed, 2 retried, 3 dead, 3 + b lateness bucket b (1-based; started = their sum).
-- Whether a shard is paused is read with GETRANGE (a read, so a full store still answers).
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
-- The raw record of `id` when it is leased with `token`, else nil and why: -1 (no
-- such job), -8 (no such job: its lease was cancelled while it ran, which `cxl`
-- remembers, when given) or -2 (another lease, or not leased: also a job of the lane
-- `L`, when given).
-- A record carries a non-zero token exactly while it is leased (every transition out of
-- `lease` clears it), and tokens are never reused, so the token alone proves the lease.
local function leased_raw(jobs, id, token, L, cxl)
  local raw = redis.call('HGET', jobs, id)
  if not raw then
    if L and lane_find(L, id) then return nil, -2 end
    if cxl and cancelled_lease(cxl, id, token) then return nil, -8 end
    return nil, -1
  end
  if token == nil or token == 0 or rec_token(raw) ~= token then
    return nil, -2
  end
  return raw
end

-- nack.lua: fails one attempt of a leased job: retry later, or dead-letter.
-- Keys (declared in transitions/nack.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- dead      ZSET id -> failed_at ms
-- wake      channel of the queue's consumers
-- stat      STRING paused flag and series of counts (common.lua: count)
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- ready     ZSET a keyed queue's due jobs in turns (keyed.lua; only with 32)
-- kinfl     HASH key -> its jobs leased (keyed.lua: key_free)
-- kwait     ZSET key -> when a parked job comes back; `kwait:<key>` its parked jobs
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard (batch.lua; only with
--           128): a job that ends is counted there
-- cxl       ZSET `<token>:<id>` -> until when: leases cancelled while they ran (cancel.lua)
-- ix        (tail; a queue with a lane only) the id's index bucket `ix:<b>`
-- Arguments: id, token, err (the error message, cut on a character boundary by the caller),
-- retry_ms (-1: the job's backoff), dead_now (dead-letter now), rnd (uniform in [0, 1), for
-- jitter).
-- Returns coded{ code, value }: 2 and the due time, 3 and the time it failed, or
-- -2 / -8 (cancelled while it ran) / -1 (nothing changed).
-- Safe to run twice: the first run clears the lease token, so a second finds no lease and
-- answers -2, changing nothing.
local raw, why = leased_raw(jobs, id, token,
  ix_n > 0 and { lane = lane, meta = lanemeta, ix = KEYS[ix_at] }, cxl)
if not raw then
  return coded{ code = why, value = 0 }
end
local r = decode(raw)
local now = now_ms()
redis.call('ZREM', lease, id)
local lflags = string.byte(redis.call('GETRANGE', stat, 1, 1)) or 0
limit_freed(stat, wake, lflags)
if bit.band(lflags, 32) ~= 0 then
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
r.err = err
if dead_now or r.attempt >= r.max_attempts then
  bury(jobs, dead, id, r, now)
  if bit.band(lflags, 128) ~= 0 then
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
    batch_end(bacc, raw, id, 'd')
    batch_count(bm, bacc, now)
  end
  count(stat, now, 3, 1)
  -- Jobs waiting for it hear of it (deps.lua).
  local dacc = {}
  dep_end(dacc, raw, id, 'd')
  if #dacc > 0 or dacc.forget then dep_post(jobs, dacc, now) end
  return coded{ code = 3, value = now }
end
local delay = retry_ms
if delay < 0 then
  delay = backoff_ms(r, r.attempt, rnd)
end
r.token = 0
r.due = now + delay
wake_if_earlier(sched, wake, r.due)
redis.call('HSET', jobs, id, encode(r))
redis.call('ZADD', sched, r.due, id)
count(stat, now, 2, 1)
return coded{ code = 2, value = r.due }
