-- delayq script; constants from Rust written in (scripts.rs)
-- claim.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local lease = KEYS[2]
local jobs = KEYS[3]
local dead = KEYS[4]
local fence = KEYS[5]
local stat = KEYS[6]
local wake = KEYS[7]
local done = KEYS[8]
local ready = KEYS[9]
local lane = KEYS[10]
local lanemeta = KEYS[11]
local kvt = KEYS[12]
local kinfl = KEYS[13]
local khold = KEYS[14]
local krate = KEYS[15]
local kwait = KEYS[16]
local bm = KEYS[17]
local cxl = KEYS[18]
local kj = KEYS[19]
local sweep_n = tonumber(ARGV[2])
local sweep_at = 20 -- sweep: KEYS[sweep_at] .. KEYS[sweep_at + sweep_n - 1]
local ix_n = tonumber(ARGV[3])
local ix_at = sweep_at + sweep_n -- ix: KEYS[ix_at] .. KEYS[ix_at + ix_n - 1]
local max = tonumber(ARGV[4])
local default_lease = tonumber(ARGV[5])
local reap_limit = tonumber(ARGV[6])
local acks_n = (#ARGV - 6) / 3
local acks_id, acks_token, acks_result = {}, {}, {}
for i = 1, acks_n do local a = 7 + (i - 1) * 3 acks_id[i] = ARGV[a + 0] acks_token[i] = tonumber(ARGV[a + 1]) acks_result[i] = ARGV[a + 2] end
local function push_leased(list, id, deadline, lease_ms, rec) list[#list + 1] = id list[#list + 1] = deadline list[#list + 1] = lease_ms list[#list + 1] = rec end
local function claim_reply(t) return { t.acks, t.jobs, t.next_us } end
local lane_entry, lane_dead, lane_due, lane_h, lane_hb, win_member, win_key, wins_key, wtombs_key, ix_prefix, ix_entry, win_width, win_entry, win_tombs, win_gone, win_unindex, win_promote, lane_find, lane_trim, lane_spill, lane_first_due, rec_kp, key_promote, key_unpark, key_ended, key_free, key_unwait, key_limits, key_take, key_unindex, rec_batch, batch_end, batch_count
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + clock_offset_us
end
local function late_bucket(ms)
  if ms <= 1 then return 1 end
  if ms <= 2 then return 2 end
  if ms <= 5 then return 3 end
  if ms <= 10 then return 4 end
  if ms <= 25 then return 5 end
  if ms <= 50 then return 6 end
  if ms <= 100 then return 7 end
  if ms <= 250 then return 8 end
  if ms <= 500 then return 9 end
  if ms <= 1000 then return 10 end
  if ms <= 2500 then return 11 end
  if ms <= 5000 then return 12 end
  if ms <= 10000 then return 13 end
  if ms <= 30000 then return 14 end
  if ms <= 60000 then return 15 end
  return 16
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
local function rec_lease(rec, default)
  if has(string.byte(rec, 2), 1) then
    return (struct.unpack('>I4', rec, 24 + 1))
  end
  return default
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
-- When the raw record `raw` expires (ms since the epoch), or nil: the hot path reads the flags
-- byte only.
local function rec_expires(raw)
  local flags = string.byte(raw, 2)
  if not has(flags, 16) then return nil end
  local v = struct.unpack('>I6', raw, rec_fixed(flags))
  if has(flags, 32) then
    v = v + struct.unpack('>I6', raw, 13)
  end
  return v
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
-- The shard's limits with the bucket refilled to `now` (µs). A clock stepping back adds
-- nothing.
local function limits_read(stat, now)
  local raw = redis.call('GETRANGE', stat, 30408, 30408 + 32 - 1)
  local l = {}
  l.per_s, l.burst, l.mif, l.tokens, l.at = struct.unpack('>dI4I4dd', raw)
  if l.per_s > 0 and now > l.at then
    l.tokens = math.min(l.burst, l.tokens + (now - l.at) * l.per_s / 1000000)
  end
  return l
end
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
-- The priority in a raw record (5 without one).
local function rec_priority(raw)
  if has(string.byte(raw, 2), 64) then
    local p = decode(raw).prio
    if p then return p end
  end
  return 5
end
-- Moves up to `n` due jobs from `sched` to `ready`, scored by priority; returns how many.
local function promote(sched, ready, jobs, now, n)
  local ids = redis.call('ZRANGEBYSCORE', sched, '-inf', now, 'WITHSCORES', 'LIMIT', 0, n)
  if #ids == 0 then return 0 end
  local names = {}
  for i = 1, #ids, 2 do names[#names + 1] = ids[i] end
  local raws = redis.call('HMGET', jobs, unpack(names))
  local zadd = {}
  for i = 1, #names do
    local p = 5
    if raws[i] then p = rec_priority(raws[i]) end
    zadd[#zadd + 1] = tonumber(ids[2 * i]) - p * 60000
    zadd[#zadd + 1] = names[i]
  end
  call_chunked('ZADD', ready, zadd)
  call_chunked('ZREM', sched, names)
  return #names
end
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

-- claim.lua: acknowledges finished jobs, recovers expired leases, then leases due jobs.
-- Keys (declared in transitions/claim.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- dead      ZSET id -> failed_at ms
-- fence     STRING counter of lease tokens (kept at or past server ms x 64)
-- stat      STRING paused flag (lease nothing), limits (common.lua: limits_read) and
--           series of counts (common.lua: count)
-- wake      channel of the queue's consumers (woken when a full max_in_flight frees)
-- done      ZSET id -> when its retention ends (acked jobs kept as done)
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
--           (common.lua: promote; only with 8)
-- lane      LIST the one-delay lane (lane.lua, above lane_entry; only with 16)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- kvt       HASH key -> its last turn ("\0V": the queue's; keyed.lua, only with 32)
-- kinfl     HASH key -> its jobs leased
-- khold     HASH key -> the end of its hold, ms
-- krate     HASH key -> its token bucket (tokens, µs)
-- kwait     ZSET key -> when a parked job comes back; `kwait:<key>` its parked jobs
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard (batch.lua; only with
--           128): a job that ends is counted there
-- cxl       ZSET `<token>:<id>` -> until when: leases cancelled while they ran (cancel.lua)
-- kj        prefix of `kj:<key>`, each key's jobs (keyed.lua: key_unindex): an acked keyed job
--           leaves it
-- sweep     (tail; a queue with a lane only) one index bucket `ix:<b>` to sweep of the ids
--           of claimed lane jobs
-- ix        (tail; a queue with a lane only) each ack's index bucket, in order
-- Arguments: max (jobs to lease), default_lease (ms), reap_limit (most expired leases to
-- recover in this call), then the tail `acks` of (id, token, result) as in ack.lua: result is
-- the handler's result kept with a job kept as done (delayq::Ack; empty: none).
-- A queue with a lane claims from the lane's head and `sched` in due order (a lane job's
-- record moves to `jobs` as it is leased, so every later path finds it there); its time
-- windows (lane.lua: win_promote) that start within a width move to `jobs` and `sched`
-- first, 1000 entries a call, and the next one's move counts as a due time.
-- A keyed queue (32) claims its due jobs from `ready` in turns, round-robin over their
-- keys, parking the jobs of a key at its limits or paused (keyed.lua: key_take); an ended
-- lease (ack, expiry) frees its key (key_free).
-- A due job past its expiry (record section 16) is dead-lettered with the error
-- 'expired' instead of leased.
-- Returns claim_reply{ acks, jobs, next_us }:
--   acks: per ack 1 (acked), -2, -8 or -1 (nothing changed)
--   jobs: each leased job (push_leased): id, deadline ms, lease ms, record (attempt and token
--   updated)
--   next_us: µs from now until the next due job or lease expiry, -1 when there is none
--   (µs so that a consumer can wake at the due time, not up to a millisecond after it); when
--   a limit holds due jobs back, until the rate limit's next token (a full max_in_flight is
--   woken by the next freed slot instead)
-- Safe to run twice: the acks of a second run answer -1; it leases the next due jobs
-- under new tokens (the first run's jobs stay leased until their leases expire and come back:
-- at-least-once, never lost).
-- Most lane entries one call reads past its max + 1 (tombstones of cancelled jobs).
local lane_scan = 1024
local now_exact_us = now_us()
local now = math.floor(now_exact_us / 1000)

local flags = redis.call('GETRANGE', stat, 0, 2 + 1)
local is_paused = string.byte(flags, 1) == 1
if is_paused then max = 0 end
local lflags = string.byte(flags, 2) or 0
local ret = nil
if acks_n > 0 then ret = queue_retention(stat, lflags) end
local lane_on = bit.band(lflags, 16) ~= 0
-- The lane's helpers are defined only for a queue with a lane, a keyed queue's only for a
-- keyed queue (scripts.rs: DEFINE): each helper defined costs every call.
local in_lane = nil
if lane_on or ix_n > 0 then
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
-- The lane's head sequence number.
lane_h = function(meta)
  return tonumber(redis.call('HGET', meta, 'h') or 0)
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
-- The key prefix of the lane's index buckets (`dq:{tag}:lane` -> `dq:{tag}:ix:`).
ix_prefix = function(lane)
  return string.sub(lane, 1, -5) .. 'ix:'
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
-- Adds id `id` of index bucket `b` to `gone` (bucket -> ids), for win_unindex.
win_gone = function(gone, b, id)
  local g = gone[b]
  if not g then
    g = {}
    gone[b] = g
  end
  g[#g + 1] = id
end
-- Deletes the index entries of the window jobs in `gone` (bucket -> ids): jobs that left
-- their window whole (moved or cancelled in bulk).
win_unindex = function(lane, gone)
  local ixp = ix_prefix(lane)
  for b, ids in pairs(gone) do call_chunked('HDEL', ixp .. b, ids) end
end
-- Moves the jobs of the windows that start within one width `W` of `now` to `jobs` and
-- `sched` (same records, same due times), the earliest window first and each from its tail
-- (the places of the entries left do not move), reading at most `n` entries; their index
-- entries go (each entry carries its bucket). Returns when the next window is due to move
-- (`now`: this call left some), or nil when there is none.
win_promote = function(lane, meta, jobs, sched, now, W, n)
  local wk = wins_key(lane)
  while true do
    local head = redis.call('ZRANGE', wk, 0, 0, 'WITHSCORES')
    if not head[1] then return nil end
    local start = tonumber(head[2])
    if start - W > now then return start - W end
    if n <= 0 then return now end
    local key = win_key(lane, start)
    local ents = redis.call('LRANGE', key, -n, -1)
    local hset, zadd, gone, moved = {}, {}, {}, 0
    for i = 1, #ents do
      if not lane_dead(ents[i]) then
        local id, b, rec = win_entry(ents[i])
        hset[#hset + 1] = id
        hset[#hset + 1] = rec
        zadd[#zadd + 1] = rec_due(rec)
        zadd[#zadd + 1] = id
        win_gone(gone, b, id)
        moved = moved + 1
      end
    end
    if moved > 0 then
      call_chunked('HSET', jobs, hset)
      call_chunked('ZADD', sched, zadd)
      win_unindex(lane, gone)
      redis.call('HINCRBY', meta, 'wn', -moved)
    end
    if #ents < n then
      -- The whole window moved.
      redis.call('DEL', key)
      redis.call('ZREM', wk, head[1])
      redis.call('HDEL', wtombs_key(lane), head[1])
    else
      redis.call('LTRIM', key, 0, -n - 1)
      if moved < #ents then win_tombs(lane, start, moved - #ents) end
    end
    n = n - #ents
  end
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
-- Drops the first `k` entries (head sequence `h`): claimed jobs and tombstones. Their bits in
-- `lanegone` stay, below the new head, until lane_mark cuts them off.
lane_trim = function(lane, meta, h, k)
  if k <= 0 then return end
  redis.call('LTRIM', lane, k, -1)
  redis.call('HSET', meta, 'h', h + k)
end
-- Moves up to `n` due live lane jobs to `jobs` and `sched` (a queue with priorities promotes
-- from there); returns how many it moved.
lane_spill = function(lane, meta, jobs, sched, now, n)
  local ents = redis.call('LRANGE', lane, 0, n - 1)
  if #ents == 0 or lane_due(ents[1]) > now then return 0 end
  local h = lane_h(meta)
  local k, moved = 0, 0
  for i = 1, #ents do
    if lane_due(ents[i]) > now then break end
    k = i
    if not lane_dead(ents[i]) then
      local id, rec = lane_entry(ents[i])
      redis.call('HSET', jobs, id, rec)
      redis.call('ZADD', sched, rec_due(rec), id)
      moved = moved + 1
    end
  end
  lane_trim(lane, meta, h, k)
  return moved
end
-- The due time of the lane's first entry, or nil when it is empty.
lane_first_due = function(lane)
  local e = redis.call('LINDEX', lane, 0)
  return e and lane_due(e)
end
  in_lane = ix_n > 0 and function(i, id)
    return lane_find({ lane = lane, meta = lanemeta, ix = KEYS[ix_at + i - 1] }, id)
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
-- Moves up to `n` due jobs from `sched` to `ready`, each at its key's next turn (see the top
-- of this file); returns how many.
key_promote = function(sched, ready, jobs, kvt, now, n)
  local ids = redis.call('ZRANGEBYSCORE', sched, '-inf', now, 'LIMIT', 0, n)
  if #ids == 0 then return 0 end
  local raws = redis.call('HMGET', jobs, unpack(ids))
  local ks, ps, names, seen = {}, {}, { '\0V' }, {}
  for i = 1, #ids do
    local k, p = '', 5
    if raws[i] then k, p = rec_kp(raws[i]) end
    ks[i], ps[i] = k, p
    if not seen[k] then
      seen[k] = true
      names[#names + 1] = k
    end
  end
  local vals = redis.call('HMGET', kvt, unpack(names))
  local V = tonumber(vals[1]) or 0
  local turn = {}
  for j = 2, #names do turn[names[j]] = math.max(tonumber(vals[j]) or 0, V) end
  local zadd = {}
  for i = 1, #ids do
    local t = turn[ks[i]] + 1
    turn[ks[i]] = t
    zadd[#zadd + 1] = t - ps[i] * 1099511627776
    zadd[#zadd + 1] = ids[i]
  end
  local hset = {}
  for j = 2, #names do
    hset[#hset + 1] = names[j]
    hset[#hset + 1] = turn[names[j]]
  end
  call_chunked('ZADD', ready, zadd)
  call_chunked('ZREM', sched, ids)
  call_chunked('HSET', kvt, hset)
  return #ids
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
-- Keys whose wait (a hold, an empty bucket) has ended bring parked jobs back (at most 64 keys
-- a call): as many as a key's rate lets start at once (`lim`: key_limits), else up to
-- 1000 (each job taken then brings one more: key_take). Returns when the next
-- wait ends (nil: none).
key_unwait = function(kwait, ready, now, lim)
  local n = 1000
  if lim and lim.per_s > 0 then n = math.max(1, math.min(lim.burst, n)) end
  local due = redis.call('ZRANGEBYSCORE', kwait, '-inf', now, 'LIMIT', 0, 64)
  for _, k in ipairs(due) do
    redis.call('ZREM', kwait, k)
    key_unpark(kwait, ready, k, n)
  end
  local head = redis.call('ZRANGE', kwait, 0, 0, 'WITHSCORES')
  return head[2] and tonumber(head[2])
end
-- Each key's limits (30456, written by shard_settings.lua with 64), or nil.
key_limits = function(stat, lflags)
  if bit.band(lflags, 64) == 0 then return nil end
  local s = redis.call('GETRANGE', stat, 30456, 30456 + 15)
  if #s < 16 then return nil end
  local mif, burst, per_s = struct.unpack('>I4I4d', s)
  return { mif = mif, burst = burst, per_s = per_s }
end
-- Takes up to `max` jobs from the front of a keyed queue's `ready` (K: its keys by field
-- name), parking those whose key may not start now. Returns the ids taken, their raw records
-- (by position) and whether more due jobs may be claimable now.
key_take = function(K, max, now, now_exact_us, lflags)
  local ids, raws = {}, {}
  if max <= 0 then return ids, raws, false end
  local lim = key_limits(K.stat, lflags)
  local window = 2 * max + 32
  local front = redis.call('ZRANGEBYSCORE', K.ready, '-inf', '(' .. 1125899906842624 / 2,
    'WITHSCORES', 'LIMIT', 0, window)
  if #front == 0 then return ids, raws, false end
  local fids = {}
  for i = 1, #front, 2 do fids[#fids + 1] = front[i] end
  local recs = redis.call('HMGET', K.jobs, unpack(fids))
  -- Each key's state, read once: st[k] = { infl, hold, tokens, rate }.
  local kp, st, names = {}, {}, {}
  for i = 1, #fids do
    local k, p = '', 5
    if recs[i] then k, p = rec_kp(recs[i]) end
    kp[i] = { k, p }
    if k ~= '' and not st[k] then
      st[k] = { infl = 0 }
      names[#names + 1] = k
    end
  end
  if #names > 0 and lim and lim.mif > 0 then
    local v = redis.call('HMGET', K.kinfl, unpack(names))
    for j = 1, #names do st[names[j]].infl = tonumber(v[j]) or 0 end
  end
  if #names > 0 then
    local v = redis.call('HMGET', K.khold, unpack(names))
    for j = 1, #names do
      local h = tonumber(v[j])
      if h and h <= now then
        redis.call('HDEL', K.khold, names[j])
      else
        st[names[j]].hold = h
      end
    end
  end
  if #names > 0 and lim and lim.per_s > 0 then
    local v = redis.call('HMGET', K.krate, unpack(names))
    for j = 1, #names do
      local tokens = lim.burst
      if v[j] then
        local t, at = struct.unpack('>dd', v[j])
        tokens = math.min(lim.burst, t + (now_exact_us - at) * lim.per_s / 1e6)
      end
      st[names[j]].tokens = tokens
      st[names[j]].rate = true
    end
  end
  local V = nil
  local gone, taken_keys, scanned = {}, {}, 0
  for i = 1, #fids do
    if #ids >= max then break end
    scanned = i
    local id, turn, raw = fids[i], tonumber(front[2 * i]), recs[i]
    local k, p = kp[i][1], kp[i][2]
    local s = st[k]
    local blocked, until_ms = false, nil
    if s then
      if s.hold then
        blocked, until_ms = true, s.hold
      elseif lim and lim.mif > 0 and s.infl >= lim.mif then
        blocked = true
      elseif s.rate and s.tokens < 1 then
        blocked, until_ms = true, now + math.ceil((1 - s.tokens) * 1000 / lim.per_s)
      end
    end
    if not raw then
      gone[#gone + 1] = id
    elseif blocked then
      redis.call('ZADD', K.ready, 'XX', turn + 1125899906842624, id)
      redis.call('ZADD', K.kwait .. ':' .. k, turn, id)
      if until_ms then redis.call('ZADD', K.kwait, 'LT', until_ms, k) end
    else
      ids[#ids + 1] = id
      raws[#ids] = raw
      local v = turn + p * 1099511627776
      if not V or v > V then V = v end
      if s then
        s.infl = s.infl + 1
        if s.rate then s.tokens = s.tokens - 1 end
        if not s.taken then
          s.taken = 0
          taken_keys[#taken_keys + 1] = k
        end
        s.taken = s.taken + 1
      end
    end
  end
  if #gone > 0 then call_chunked('ZREM', K.ready, gone) end
  if #ids > 0 then call_chunked('ZREM', K.ready, ids) end
  for _, k in ipairs(taken_keys) do
    local s = st[k]
    redis.call('HINCRBY', K.kinfl, k, s.taken)
    if s.rate then
      redis.call('HSET', K.krate, k, struct.pack('>dd', s.tokens, now_exact_us))
    end
  end
  if V then
    local old = tonumber(redis.call('HGET', K.kvt, '\0V')) or 0
    if V > old then redis.call('HSET', K.kvt, '\0V', V) end
  end
  -- The chain: a key whose job was taken brings its next parked job back (parked again by
  -- the next claim if the key is still held).
  for _, k in ipairs(taken_keys) do key_unpark(K.kwait, K.ready, k, st[k].taken) end
  local more = scanned < #fids or #fids == window
  return ids, raws, more
end

-- The key index. Every job of a key in this shard is a member of the ZSET `kj:<key>`, all
-- scored 0 so they sort by id (a page is ZRANGE … BYLEX): enqueue.lua and batch_join.lua add
-- a keyed job when they write it, an ack and a cancel by id take it out (key_unindex); any
-- other way a job leaves (a bulk cancel of a state, dead letters purged, a replace under
-- another key) leaves its member behind, and the next reader of the key drops it (a member
-- is trusted only when the job's record exists, is not done and carries the key). Keyed jobs
-- never go to the lane (enqueue.lua), so a member is always found in `jobs`. The STRING `kj`
-- says that the index holds every keyed job of the shard: written with the shard's first keyed
-- job, or by key_indexed (lane.lua: it reads the lane) for a shard whose keyed jobs predate the index.
-- Job `id` (raw record `raw`) left the store: out of its key's index, if it has a key.
key_unindex = function(kj, raw, id)
  local k = rec_kp(raw)
  if k ~= '' then redis.call('ZREM', kj .. ':' .. k, id) end
end
end
local batched = bit.band(lflags, 128) ~= 0
-- The ends of batch jobs in this call (batch.lua), counted at its end.
local bacc = nil
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
  bacc = {}
end
local acks, kept, acked = ack_pairs(jobs, lease, acks_id, acks_token, acks_n, done, ret, now,
  in_lane, acks_result, cxl)
if kept > 0 or ret then trim_done(jobs, done, now) end
if kept > 0 and not ret then mark_retains(stat) end
-- What this call counts (common.lua: count): counter index -> n.
local c = { [1] = 0, [2] = 0, [3] = 0 }
-- Keys of the leases that end in this call (keyed.lua: key_ended), freed before the claim.
local ended = {}
-- Ends of jobs that others wait for (deps.lua), posted to the outbox at the end.
local dacc = {}
for i = 1, #acks do
  if acks[i] == 1 then
    c[1] = c[1] + 1
    if keyed then
      key_ended(ended, acked[i])
      key_unindex(kj, acked[i], acks_id[i])
    end
    if batched then batch_end(bacc, acked[i], acks_id[i], 'o', acks_result[i]) end
    dep_end(dacc, acked[i], acks_id[i], 'o', acks_result[i])
  end
end

-- Crash recovery: an expired lease means the consumer died or stalled. The attempt it was
-- given counts; the job is due again now, or dead when attempts are used up. Only read
-- further when the earliest lease has expired (one call in the common case).
local lhead = redis.call('ZRANGE', lease, 0, 0, 'WITHSCORES')
local lease_next = lhead[2] and tonumber(lhead[2])
if lease_next and lease_next <= now then
  local expired = redis.call('ZRANGEBYSCORE', lease, '-inf', now, 'LIMIT', 0, reap_limit)
  for _, id in ipairs(expired) do
    redis.call('ZREM', lease, id)
    local raw = redis.call('HGET', jobs, id)
    if raw then
      if keyed then key_ended(ended, raw) end
      local r = decode(raw)
      r.err = 'lease expired (attempt ' .. r.attempt .. ')'
      if r.attempt >= r.max_attempts then
        bury(jobs, dead, id, r, now)
        if batched then batch_end(bacc, raw, id, 'd') end
        dep_end(dacc, raw, id, 'd')
        c[3] = c[3] + 1
      else
        c[2] = c[2] + 1
        r.token = 0
        r.due = now
        redis.call('HSET', jobs, id, encode(r))
        redis.call('ZADD', sched, now, id)
      end
    end
  end
  lhead = redis.call('ZRANGE', lease, 0, 0, 'WITHSCORES')
  lease_next = lhead[2] and tonumber(lhead[2])
end
if keyed then key_free(kinfl, kwait, ready, ended) end
-- No lease at all: no key has a job in flight (whatever a lost count says).
if keyed and not lease_next then redis.call('DEL', kinfl) end

-- Limits: lease no more than the bucket's whole tokens and the free in-flight slots.
local want, lim = max, nil
if max > 0 and bit.band(lflags, 1) ~= 0 then
  lim = limits_read(stat, now_exact_us)
  if lim.per_s > 0 then max = math.min(max, math.floor(lim.tokens)) end
  if lim.mif > 0 then
    lim.leased = redis.call('ZCARD', lease)
    max = math.max(0, math.min(max, lim.mif - lim.leased))
  end
end

local ids = {}
-- The claimed jobs' records taken from the lane (by position in ids), and the ids taken from
-- `from`.
local lane_raws, sids = {}, ids
local next_due = nil
local from = sched
local lmeta = lanemeta
-- When the lane's next time window moves (nil: none, or the queue has no windows).
local wnext = nil
if lane_on and not is_paused then
  local W = win_width(flags, 0)
  if W > 0 then
    wnext = win_promote(lane, lmeta, jobs, sched, now, W, 1000)
  end
end
if keyed then
  -- Keys: due jobs move to `ready` at their keys' turns; the first turns whose keys may start
  -- are claimed (keyed.lua). Due lane jobs go to `sched` first.
  from = ready
  sids = {}
  if lane_on and max > 0 then lane_spill(lane, lmeta, jobs, sched, now, 1000) end
  local wait_next = nil
  if max > 0 then wait_next = key_unwait(kwait, ready, now, key_limits(stat, lflags)) end
  local head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
  if max > 0 and head[2] and tonumber(head[2]) <= now then
    key_promote(sched, ready, jobs, kvt, now, 1000)
    head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
  end
  local K = { stat = stat, ready = ready, jobs = jobs, kvt = kvt, kinfl = kinfl, khold = khold,
    krate = krate, kwait = kwait }
  local more
  ids, lane_raws, more = key_take(K, max, now, now_exact_us, lflags)
  if more then next_due = now end
  if next_due == nil and head[2] then next_due = tonumber(head[2]) end
  if wait_next and (next_due == nil or wait_next < next_due) then next_due = wait_next end
  local lf = lane_on and lane_first_due(lane)
  if lf and (next_due == nil or lf < next_due) then next_due = lf end
elseif bit.band(lflags, 8) == 0 and not lane_on then
  -- The first max + 1 scheduled jobs by due time: the due ones are claimed, the first one not
  -- claimed tells when to come back.
  local head = redis.call('ZRANGE', sched, 0, max, 'WITHSCORES')
  for i = 1, #head, 2 do
    local due = tonumber(head[i + 1])
    if due <= now and #ids < max then
      ids[#ids + 1] = head[i]
    else
      next_due = due
      break
    end
  end
elseif bit.band(lflags, 8) == 0 then
  -- The lane beside `sched`: the first max + 1 of each, merged by due time.
  sids = {}
  local head = redis.call('ZRANGE', sched, 0, max, 'WITHSCORES')
  -- The lane is read max + 1 entries first, then past tombstones (cancelled jobs) twice as
  -- many each time, up to lane_scan entries more in one call.
  local ents, eof, step = {}, false, max + 1
  local function more()
    if eof or #ents > max + lane_scan then return false end
    local c = redis.call('LRANGE', lane, #ents, #ents + step - 1)
    if #c < step then eof = true end
    step = math.min(2 * step, lane_scan)
    for i = 1, #c do ents[#ents + 1] = c[i] end
    return #c > 0
  end
  more()
  local lh = 0
  if #ents > 0 then lh = lane_h(lmeta) end
  local si, li = 1, 1
  while true do
    while (li <= #ents or more()) and lane_dead(ents[li]) do li = li + 1 end
    local sd = head[2 * si] and tonumber(head[2 * si])
    local ld = li <= #ents and lane_due(ents[li])
    if not ld and not eof then
      -- Tombstones filled what this call may read of the lane: the rest next call.
      next_due = now
      break
    end
    local pick_lane = ld and (not sd or ld <= sd)
    local d = pick_lane and ld or sd
    if not d then break end
    if d > now or #ids >= max then
      next_due = d
      break
    end
    if pick_lane then
      local id, rec = lane_entry(ents[li])
      ids[#ids + 1] = id
      lane_raws[#ids] = rec
      li = li + 1
    else
      ids[#ids + 1] = head[2 * si - 1]
      sids[#sids + 1] = head[2 * si - 1]
      si = si + 1
    end
  end
  if li > 1 then
    local h2 = lh + li - 1
    lane_trim(lane, lmeta, lh, li - 1)
    -- Ids of claimed lane jobs leave the index a bucket at a time (every 32 claimed).
    local ix = sweep_n > 0 and KEYS[sweep_at]
    if ix and math.floor(h2 / 32) ~= math.floor(lh / 32) then
      local all = redis.call('HGETALL', ix)
      local old = {}
      for i = 1, #all, 2 do
        -- (A time window's entry has no sequence number: lane.lua, ix_entry.)
        local kind, s = ix_entry(all[i + 1])
        if kind == 'L' and s < h2 then old[#old + 1] = all[i] end
      end
      if #old > 0 then call_chunked('HDEL', ix, old) end
    end
  end
else
  -- Priorities: due jobs move to `ready` (only when the head of `sched` is due: one read in
  -- the common case); the best max of them are claimed. Due lane jobs go to `sched` first.
  from = ready
  if lane_on and max > 0 then lane_spill(lane, lmeta, jobs, sched, now, 1000) end
  local head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
  if max > 0 and head[2] and tonumber(head[2]) <= now then
    promote(sched, ready, jobs, now, 1000)
    head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
  end
  local best = redis.call('ZRANGE', ready, 0, max)
  for i = 1, #best do
    if i <= max then ids[#ids + 1] = best[i] else next_due = now end
  end
  if next_due == nil and head[2] then next_due = tonumber(head[2]) end
  local lf = lane_on and lane_first_due(lane)
  if lf and (next_due == nil or lf < next_due) then next_due = lf end
end

if wnext and (next_due == nil or wnext < next_due) then next_due = wnext end

local out, leased = {}, 0
local n = #ids
if n > 0 then
  local raws = {}
  if #sids > 0 then
    redis.call('ZREM', from, unpack(sids))
    local got = redis.call('HMGET', jobs, unpack(sids))
    local j = 0
    for i = 1, n do
      if lane_raws[i] then
        raws[i] = lane_raws[i]
      else
        j = j + 1
        raws[i] = got[j]
      end
    end
  else
    raws = lane_raws
  end
  local token = redis.call('INCRBY', fence, n) - n
  -- Replication is asynchronous: after a failover the counter may be behind tokens the old
  -- master handed out. Tokens never fall behind the server clock (64 per ms), so the new
  -- master's tokens start past any the old one gave (unless it sustained > 64 claims per ms).
  local floor = now * 64
  if token < floor then
    token = floor
    redis.call('SET', fence, floor + n)
  end
  local hset, zadd = {}, {}
  for i = 1, n do
    local raw = raws[i]
    local exp = raw and rec_expires(raw)
    if exp and now > exp then
      -- Expired unstarted: dead-lettered instead of running late.
      local r = decode(raw)
      r.err = 'expired'
      bury(jobs, dead, ids[i], r, now)
      if batched then batch_end(bacc, raw, ids[i], 'd') end
      dep_end(dacc, raw, ids[i], 'd')
      c[3] = c[3] + 1
    elseif raw then
      local id = ids[i]
      token = token + 1
      local rec = rec_claimed(raw, rec_attempt(raw) + 1, token)
      local lease_ms = rec_lease(raw, default_lease)
      local deadline = now + lease_ms
      local b = 3 + late_bucket(now - rec_due(raw))
      c[b] = (c[b] or 0) + 1
      if lease_next == nil or deadline < lease_next then lease_next = deadline end
      hset[#hset + 1] = id
      hset[#hset + 1] = rec
      zadd[#zadd + 1] = deadline
      zadd[#zadd + 1] = id
      push_leased(out, id, deadline, lease_ms, rec)
      leased = leased + 1
    end
  end
  if #hset > 0 then
    redis.call('HSET', jobs, unpack(hset))
    redis.call('ZADD', lease, unpack(zadd))
  end
end

count(stat, now, nil, nil, c)
if batched then batch_count(bm, bacc, now) end
if #dacc > 0 or dacc.forget then dep_post(jobs, dacc, now) end

local held = false
if lim then
  if lim.per_s > 0 then
    lim.tokens = lim.tokens - leased
    redis.call('SETRANGE', stat, 30408 + 16, struct.pack('>dd', lim.tokens, now_exact_us))
  end
  held = next_due ~= nil and next_due <= now and leased < want
  if held then
    -- Due jobs wait on a limit: a full max_in_flight is woken by the next freed slot (and
    -- the next lease expiry), an empty bucket when its next token is due.
    if lim.mif > 0 and lim.leased + leased >= lim.mif then
      next_due = nil
      if bit.band(lflags, 2) == 0 then
        lflags = lflags + 2
        redis.call('BITFIELD', stat, 'SET', 'u8', 1 * 8, lflags)
      end
    elseif lim.per_s > 0 and lim.tokens < 1 then
      next_due = now + math.ceil((1 - lim.tokens) * 1000 / lim.per_s)
    end
  end
end
-- Slots freed by acks or recovered leases wake consumers a full max_in_flight held back,
-- unless this claim was itself held back (they would find the same).
if not held and (c[1] > 0 or c[2] > 0 or c[3] > 0) then
  limit_freed(stat, wake, lflags)
end

-- An acked head may make lease_next early; waking early only costs an empty claim. A paused
-- queue comes back only to recover leases (resuming publishes a wake-up).
local next_ms = nil
if next_due and not is_paused then next_ms = math.max(0, next_due - now) end
if lease_next then
  local l = math.max(0, lease_next - now)
  if next_ms == nil or l < next_ms then next_ms = l end
end
local next_us = -1
if next_ms then next_us = math.max(0, (now + next_ms) * 1000 - now_exact_us) end
return claim_reply{ acks = acks, jobs = out, next_us = next_us }
