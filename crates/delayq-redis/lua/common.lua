-- common.lua: helpers prepended to every delayq script (not a script on its own). The names in
-- CAPITALS are constants of the prelude `scripts.rs` generates from Rust, written into the
-- text as their values when a script is built: the record layout (HEADER, HEADER_LEN,
-- AT_ATTEMPT, AT_DUE, AT_CREATED, AT_TOKEN, F_LEASE, F_BACKOFF, F_TIMEOUT, F_EXPIRES, F_EXPIRES_REL,
-- F_EXTRA and its X_* tags (X_SIZED: the first tag whose value has a u16 length), F_DONE, F_ERROR, RECORD_VERSION), MAX_ERROR,
-- the default backoff (DEFAULT_BKIND, DEFAULT_BBASE, DEFAULT_BCAP), state codes (ST_*),
-- reply codes (R_*), the series layout (SERIES_*, S_*), the limit flags (L_*), and PUBLISH: the command that
-- publishes wake-ups ('PUBLISH' on one server, 'SPUBLISH' on a Cluster).
--
-- The record (format v1, byte table in ARCHITECTURE.md, defined in record.rs) has a fixed
-- header so the hot paths (claim, ack) read and patch attempt and token without decoding the
-- record; the client decodes records it receives. The id is not in the record: it is the hash
-- field and the sorted-set member.

--@ now_ms needs now_us
local function now_ms()
  return math.floor(now_us() / 1000)
end

--@ has
local function has(flags, f)
  return bit.band(flags, f) ~= 0
end

--@ rec_token
-- Fast accessors of the fixed header.
local function rec_token(rec)
  return (struct.unpack('>I6', rec, AT_TOKEN))
end

--@ rec_attempt
local function rec_attempt(rec)
  return (struct.unpack('>H', rec, AT_ATTEMPT))
end

--@ rec_due
local function rec_due(rec)
  return (struct.unpack('>I6', rec, AT_DUE))
end

--@ rec_lease needs has
local function rec_lease(rec, default)
  if has(string.byte(rec, 2), F_LEASE) then
    return (struct.unpack('>I4', rec, HEADER_LEN + 1))
  end
  return default
end

--@ rec_claimed
-- The record with a new attempt count and lease token, everything else unchanged.
local function rec_claimed(rec, attempt, token)
  return string.sub(rec, 1, AT_ATTEMPT - 1) .. struct.pack('>H', attempt)
    .. string.sub(rec, AT_ATTEMPT + 2, AT_TOKEN - 1) .. struct.pack('>I6', token)
    .. string.sub(rec, HEADER_LEN + 1)
end

--@ decode needs has
-- Full decode and encode, for the paths that change more than the header.
local function decode(s)
  local r = {}
  local version, flags, pos
  version, flags, r.attempt, r.max_attempts, r.due, r.created, r.token, pos =
    struct.unpack(HEADER, s)
  if version ~= RECORD_VERSION then
    error('delayq: unknown record version ' .. tostring(version))
  end
  if has(flags, F_LEASE) then
    r.lease, pos = struct.unpack('>I4', s, pos)
  end
  if has(flags, F_BACKOFF) then
    r.bkind, r.bbase, r.bcap, pos = struct.unpack('>BI4I4', s, pos)
  end
  if has(flags, F_TIMEOUT) then
    r.timeout, pos = struct.unpack('>I4', s, pos)
  end
  if has(flags, F_EXPIRES) then
    r.expires, pos = struct.unpack('>I6', s, pos)
    r.expires_rel = has(flags, F_EXPIRES_REL)
  end
  if has(flags, F_EXTRA) then
    local n
    n, pos = struct.unpack('>B', s, pos)
    for _ = 1, n do
      local tag
      tag, pos = struct.unpack('>B', s, pos)
      if tag == X_PRIORITY then
        r.prio, pos = struct.unpack('>B', s, pos)
      elseif tag == X_KEEP then
        r.keep, pos = struct.unpack('>I6', s, pos)
      elseif tag == X_DEDUPE then
        r.dedupe, pos = struct.unpack('>I6', s, pos)
      elseif tag == X_TARGET then
        local n
        n, pos = struct.unpack('>H', s, pos)
        r.target = string.sub(s, pos, pos + n - 1)
        pos = pos + n
      elseif tag >= X_SIZED then
        -- X_TRACE, X_RESULT, or a later build's sized extra: kept as read, written back by
        -- encode.
        local n
        n, pos = struct.unpack('>H', s, pos)
        if tag == X_TRACE then
          r.trace = string.sub(s, pos, pos + n - 1)
        elseif tag == X_RESULT then
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
  if has(flags, F_DONE) then
    r.done_at, r.dedupe_until, pos = struct.unpack('>I6I6', s, pos)
  end
  if has(flags, F_ERROR) then
    local n
    n, pos = struct.unpack('>H', s, pos)
    r.err = string.sub(s, pos, pos + n - 1)
    pos = pos + n
  end
  r.payload = string.sub(s, pos)
  return r
end

--@ encode
local function encode(r)
  local flags = 0
  local parts = {}
  if r.lease then
    flags = flags + F_LEASE
    parts[#parts + 1] = struct.pack('>I4', r.lease)
  end
  if r.bkind then
    flags = flags + F_BACKOFF
    parts[#parts + 1] = struct.pack('>BI4I4', r.bkind, r.bbase, r.bcap)
  end
  if r.timeout then
    flags = flags + F_TIMEOUT
    parts[#parts + 1] = struct.pack('>I4', r.timeout)
  end
  if r.expires then
    flags = flags + F_EXPIRES
    if r.expires_rel then flags = flags + F_EXPIRES_REL end
    parts[#parts + 1] = struct.pack('>I6', r.expires)
  end
  local extras = {}
  if r.prio then extras[#extras + 1] = struct.pack('>BB', X_PRIORITY, r.prio) end
  if r.keep then extras[#extras + 1] = struct.pack('>BI6', X_KEEP, r.keep) end
  if r.dedupe then extras[#extras + 1] = struct.pack('>BI6', X_DEDUPE, r.dedupe) end
  if r.target then extras[#extras + 1] = struct.pack('>BH', X_TARGET, #r.target) .. r.target end
  if r.trace then extras[#extras + 1] = struct.pack('>BH', X_TRACE, #r.trace) .. r.trace end
  if r.result then
    extras[#extras + 1] = struct.pack('>BH', X_RESULT, #r.result) .. r.result
  end
  if r.sized then
    for i = 1, #r.sized do extras[#extras + 1] = r.sized[i] end
  end
  if #extras > 0 then
    flags = flags + F_EXTRA
    parts[#parts + 1] = struct.pack('>B', #extras) .. table.concat(extras)
  end
  if r.done_at then
    flags = flags + F_DONE
    parts[#parts + 1] = struct.pack('>I6I6', r.done_at, r.dedupe_until)
  end
  if r.err then
    -- Callers cut errors on a character boundary first (limits::truncate_error); this cut
    -- only bounds what a record can hold.
    local e = string.sub(r.err, 1, MAX_ERROR)
    flags = flags + F_ERROR
    parts[#parts + 1] = struct.pack('>H', #e) .. e
  end
  return struct.pack(HEADER, RECORD_VERSION, flags, r.attempt, r.max_attempts, r.due, r.created,
    r.token or 0) .. table.concat(parts) .. r.payload
end

--@ rec_fixed needs has
-- Where the optional section after the timeout starts in a raw record of flags `flags` (the
-- expiry, else the extras): the lease, backoff and timeout sections skipped by their fixed
-- widths, without decoding them.
local function rec_fixed(flags)
  local pos = HEADER_LEN + 1
  if has(flags, F_LEASE) then pos = pos + 4 end
  if has(flags, F_BACKOFF) then pos = pos + 9 end
  if has(flags, F_TIMEOUT) then pos = pos + 4 end
  return pos
end

--@ rec_expires needs has rec_fixed
-- When the raw record `raw` expires (ms since the epoch), or nil: the hot path reads the flags
-- byte only.
local function rec_expires(raw)
  local flags = string.byte(raw, 2)
  if not has(flags, F_EXPIRES) then return nil end
  local v = struct.unpack('>I6', raw, rec_fixed(flags))
  if has(flags, F_EXPIRES_REL) then
    v = v + struct.unpack('>I6', raw, AT_CREATED)
  end
  return v
end

--@ rec_extra needs has rec_fixed
-- The first extra of the raw record `raw` tagged `want` (or `also`, when given): where its
-- value starts, its length and its tag; nil when there is none. Read without decoding the
-- rest: X_PRIORITY holds one byte, X_KEEP and X_DEDUPE six, every other extra (X_TARGET, the
-- sized ones) a u16 length, then its bytes.
local function rec_extra(raw, want, also)
  local flags = string.byte(raw, 2)
  if not has(flags, F_EXTRA) then return nil end
  local pos = rec_fixed(flags)
  if has(flags, F_EXPIRES) then pos = pos + 6 end
  local n = string.byte(raw, pos)
  pos = pos + 1
  for _ = 1, n do
    local tag = string.byte(raw, pos)
    local len, at = 1, pos + 1
    if tag == X_KEEP or tag == X_DEDUPE then
      len = 6
    elseif tag ~= X_PRIORITY then
      len, at = struct.unpack('>H', raw, pos + 1), pos + 3
    end
    if tag == want or tag == also then return at, len, tag end
    pos = at + len
  end
  return nil
end

--@ backoff_ms
-- Delay before the retry after failed attempt `attempt`; rnd is uniform in [0, 1).
-- Mirrors delayq::Backoff::delay.
local function backoff_ms(r, attempt, rnd)
  local kind = r.bkind or DEFAULT_BKIND
  local base = r.bbase or DEFAULT_BBASE
  local cap = r.bcap or DEFAULT_BCAP
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

--@ due_from
-- Due time from a schedule: `mode` (its bits SPEC_WHEN) SPEC_NOW now, SPEC_DELAY a delay of
-- `t` ms, SPEC_AT the absolute ms `t` (past = now).
local function due_from(mode, t, now)
  -- (SPEC_REPLACE is the highest bit: the rest of the byte is SPEC_WHEN; arithmetic, no call.)
  local when = mode % SPEC_REPLACE
  if when == SPEC_DELAY then
    return now + t
  elseif when == SPEC_AT and t > now then
    return t
  end
  return now
end

--@ call_chunked
-- Runs `cmd key a1 a2 ...` over a flat list in chunks (Lua's unpack limit is ~8000 values).
local function call_chunked(cmd, key, list)
  local step = 2000
  for i = 1, #list, step do
    local j = math.min(i + step - 1, #list)
    redis.call(cmd, key, unpack(list, i, j))
  end
end

--@ wake_if_earlier
-- Tells waiting consumers that a job due at `due` exists, if it is earlier than the head
-- they are sleeping towards (and than `bound`, when given: the lane's first due time). Call
-- before adding the job to `sched`.
local function wake_if_earlier(sched, wake, due, bound)
  if bound and due >= bound then return end
  local head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
  if head[2] == nil or due < tonumber(head[2]) then
    redis.call(PUBLISH, wake, due)
  end
end

--@ refusal
-- The reply code refusing an operation on a job in state `st` (nil: missing).
local function refusal(st)
  if st == ST_SCHEDULED then return R_SCHEDULED end
  if st == ST_LEASED then return R_LEASED end
  if st == ST_DEAD then return R_DEAD end
  return R_MISSING
end

--@ queue_retention
-- Retention (delayq::Retention): the queue's, when the byte at S_FLAGS has L_RETAIN, from
-- the 16 bytes at S_RETAIN of the `stat` string (keep_done_ms, dedupe_ms as doubles); nil else.
local function queue_retention(stat, lflags)
  if bit.band(lflags, L_RETAIN) == 0 then return nil end
  local keep, dedupe = struct.unpack('>dd', redis.call('GETRANGE', stat, S_RETAIN, S_RETAIN + 15))
  return { keep = keep, dedupe = dedupe }
end

--@ rec_keeps needs rec_extra
-- Whether the raw record `raw` has a retention of its own (extra X_KEEP or X_DEDUPE): an ack
-- deletes every other completed job of a queue without retention in one batch.
local function rec_keeps(raw)
  return rec_extra(raw, X_KEEP, X_DEDUPE) ~= nil
end

--@ keep_done needs decode encode
-- A completed job: deleted, or kept as done when its retention (its own, else the queue's
-- `ret`) says so — marked F_DONE with its completion time and the end of its dedupe window
-- (and `result`, when given, stored as its X_RESULT extra),
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

--@ mark_retains
-- A job was kept by its own retention on a queue without one (`ret` nil): the queue is marked
-- as retaining (L_RETAIN with a zero retention: keeps nothing itself), so that later acks and
-- claims trim kept jobs whose time is up. A settings change without retention clears the mark;
-- the next job kept by its own sets it again.
local function mark_retains(stat)
  local f = redis.call('BITFIELD', stat, 'GET', 'u8', S_FLAGS * 8)[1]
  if bit.band(f, L_RETAIN) ~= 0 then return end
  redis.call('SETRANGE', stat, S_RETAIN, struct.pack('>dd', 0, 0))
  redis.call('BITFIELD', stat, 'SET', 'u8', S_FLAGS * 8, f + L_RETAIN)
end

--@ trim_done needs has
-- Deletes up to TRIM_PER_CALL kept jobs whose retention is over (an entry whose id was
-- enqueued again since only leaves the index).
local function trim_done(jobs, done, now)
  local old = redis.call('ZRANGEBYSCORE', done, '-inf', now, 'LIMIT', 0, TRIM_PER_CALL)
  for _, id in ipairs(old) do
    local raw = redis.call('HGET', jobs, id)
    if raw and has(string.byte(raw, 2), F_DONE) then redis.call('HDEL', jobs, id) end
    redis.call('ZREM', done, id)
  end
end

--@ bury needs encode
-- Dead-letters a decoded record.
local function bury(jobs, dead, id, r, now)
  r.token = 0
  redis.call('HSET', jobs, id, encode(r))
  redis.call('ZADD', dead, now, id)
end

-- Throughput and lateness (delayq::series; late_bucket(ms), the 1-based lateness bucket of a
-- delay, is generated in the prelude from series.rs): the shard's `stat` string, read and written with
-- BITFIELD at fixed offsets (series.rs `layout`): the paused flag (a byte at S_PAUSED), the
-- last interval counted in (u32 at S_LAST), the totals of the intervals before it (S_COUNTERS
-- i64 from S_TOTALS) and a ring of SERIES_SLOTS intervals of S_SLOT bytes from S_RING: the
-- interval number (u32), then S_COUNTERS counts (u32). Counter indexes: 0 enqueued,
-- 1 completed, 2 retried, 3 dead, 3 + b lateness bucket b (1-based; started = their sum).
-- Whether a shard is paused is read with GETRANGE (a read, so a full store still answers).

--@ new_interval
-- Interval n begins in the slot at byte `at`, where `c` was just added: folds the last
-- interval into the totals (minus `c` when it shares the slot), then zeroes and stamps the
-- slot and sets it as the last. A clock stepping back across an interval boundary leaves the
-- counts where they landed (lost to the series).
local function new_interval(stat, n, at, c)
  local last = redis.call('BITFIELD', stat, 'GET', 'u32', S_LAST * 8)[1]
  if last > n then return false end
  if last ~= 0 then
    local lat = S_RING + (last % SERIES_SLOTS) * S_SLOT
    local raw = redis.call('GETRANGE', stat, lat, lat + S_SLOT - 1)
    if #raw == S_SLOT and struct.unpack('>I4', raw) == last then
      local add = { 'BITFIELD', stat }
      for i = 0, S_COUNTERS - 1 do
        local v = struct.unpack('>I4', raw, 5 + 4 * i)
        if lat == at then v = v - (c[i] or 0) end
        if v > 0 then
          add[#add + 1] = 'INCRBY'
          add[#add + 1] = 'i64'
          add[#add + 1] = (S_TOTALS + 8 * i) * 8
          add[#add + 1] = v
        end
      end
      if #add > 2 then redis.call(unpack(add)) end
    end
  end
  redis.call('SETRANGE', stat, at, struct.pack('>I4', n) .. string.rep('\0', S_SLOT - 4))
  redis.call('BITFIELD', stat, 'SET', 'u32', S_LAST * 8, n)
  return true
end

--@ count needs new_interval
-- Adds `v` to counter `i` — or, with `c` (counter index -> n), every count of `c` — in now's
-- interval: one BITFIELD that also reads the slot's interval number; when the slot held
-- another one (once per interval, see new_interval) it is counted in again. Counting never
-- fails a transition: under a full store (`maxmemory`) the counts are skipped.
local function count(stat, now, i, v, c)
  local n = math.floor(now / SERIES_INTERVAL)
  local at = S_RING + (n % SERIES_SLOTS) * S_SLOT
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

-- Rate and concurrency limits (delayq::QueueSettings::shard_throttle): when the byte at S_FLAGS
-- has L_ON, the S_LIMITS_LEN bytes at S_LIMITS of the `stat` string hold per_s (0: no rate
-- limit), burst, max_in_flight (0: none), the bucket's tokens and when they were counted (µs).
-- L_WAITING: a claim was held back by max_in_flight, so the next freed slot wakes consumers.
-- A queue without limits pays one byte more in a GETRANGE the claim makes anyway.

--@ limits_read
-- The shard's limits with the bucket refilled to `now` (µs). A clock stepping back adds
-- nothing.
local function limits_read(stat, now)
  local raw = redis.call('GETRANGE', stat, S_LIMITS, S_LIMITS + S_LIMITS_LEN - 1)
  local l = {}
  l.per_s, l.burst, l.mif, l.tokens, l.at = struct.unpack('>dI4I4dd', raw)
  if l.per_s > 0 and now > l.at then
    l.tokens = math.min(l.burst, l.tokens + (now - l.at) * l.per_s / 1000000)
  end
  return l
end

--@ cancelled_lease
-- Whether the lease (`id`, `token`) was ended by a cancel with `running`, which `cxl`
-- remembers (cancel.lua): asked only about a lease whose job is missing (leased_raw,
-- ack_pairs), so a path that finds its lease pays nothing for it.
local function cancelled_lease(cxl, id, token)
  return token ~= 0 and redis.call('ZSCORE', cxl, string.format('%d', token) .. ':' .. id) ~= false
end

--@ limit_freed
-- Slots were freed (an ack, nack or release): wakes the consumers a full max_in_flight held
-- back, if any (`flags`: the byte at S_FLAGS when the caller has read it).
local function limit_freed(stat, wake, flags)
  flags = flags or string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
  if bit.band(flags, L_WAITING) ~= 0 then
    redis.call('BITFIELD', stat, 'SET', 'u8', S_FLAGS * 8, flags - L_WAITING)
    redis.call(PUBLISH, wake, 0)
  end
end

-- Priorities (delayq::NewJob::priority): a queue that has had a job with a priority (the byte
-- at S_FLAGS has L_PRIO) keeps its due jobs in `ready`, scored by due time minus
-- PRIORITY_AGING_MS per priority level: claims take the lowest score first, so a higher
-- priority goes first and a job gains a level for every PRIORITY_AGING_MS it waits (none
-- starves). A job enters `ready` when it is due (promote), never before.

--@ rec_priority needs has decode
-- The priority in a raw record (DEFAULT_PRIORITY without one).
local function rec_priority(raw)
  if has(string.byte(raw, 2), F_EXTRA) then
    local p = decode(raw).prio
    if p then return p end
  end
  return DEFAULT_PRIORITY
end

--@ promote needs call_chunked rec_priority
-- Moves up to `n` due jobs from `sched` to `ready`, scored by priority; returns how many.
local function promote(sched, ready, jobs, now, n)
  local ids = redis.call('ZRANGEBYSCORE', sched, '-inf', now, 'WITHSCORES', 'LIMIT', 0, n)
  if #ids == 0 then return 0 end
  local names = {}
  for i = 1, #ids, 2 do names[#names + 1] = ids[i] end
  local raws = redis.call('HMGET', jobs, unpack(names))
  local zadd = {}
  for i = 1, #names do
    local p = DEFAULT_PRIORITY
    if raws[i] then p = rec_priority(raws[i]) end
    zadd[#zadd + 1] = tonumber(ids[2 * i]) - p * PRIORITY_AGING_MS
    zadd[#zadd + 1] = names[i]
  end
  call_chunked('ZADD', ready, zadd)
  call_chunked('ZREM', sched, names)
  return #names
end

