-- delayq script; constants from Rust written in (scripts.rs)
-- dep_release.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local jobs = KEYS[2]
local dead = KEYS[3]
local waiting = KEYS[4]
local wake = KEYS[5]
local stat = KEYS[6]
local bm = KEYS[7]
local dreg = KEYS[8]
local id = ARGV[2]
local registered = (ARGV[3] == '1')
local ends_n = (#ARGV - 3) / 3
local ends_field, ends_how, ends_result = {}, {}, {}
for i = 1, ends_n do local a = 4 + (i - 1) * 3 ends_field[i] = ARGV[a + 0] ends_how[i] = ARGV[a + 1] ends_result[i] = ARGV[a + 2] end
local function coded(t) return { t.code, t.value } end
local call_chunked, rec_batch, batch_end, batch_count
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

-- dep_release.lua: tells a dependent how some of its dependencies ended, and settles it (deps.lua,
-- at the top).
-- Keys (declared in transitions/dep_release.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- jobs      HASH id -> record
-- dead      ZSET id -> failed_at ms
-- waiting   ZSET id -> due_ms: jobs waiting for their dependencies
-- wake      channel of the queue's consumers (a dependent due before the head)
-- stat      STRING flags (128) and series of counts
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard (batch.lua): a dependent
--           that ends is counted there
-- dreg      ZSET id -> ms: dependents whose waiters are not all registered yet
-- Arguments: id (the dependent), registered (its waiters are all registered now: it leaves
-- `dreg`), then the tail `ends` of (field, how, result): a dependency (`<queue>\0<id>`), how it
-- ended (`o`, `d`, `c`) and its result ('' : none).
-- A field changes from `p` only (so an end delivered twice counts once), `\0n` counting the
-- pending ones and `\0x` keeping the first failed one; results are kept while they fit
-- 1048576 together (`\0rb`), later ones left out. Then a waiting dependent settles: a
-- failed dependency dead-letters it (`last_error` naming the dependency) or cancels it, by
-- its policy (20), unless the policy is to run; with none pending it moves to `sched`,
-- due at the later of its due time and now. A dependent that ends this way is itself a
-- dependency that ended: its waiters are posted to the outbox (deps.lua: dep_post).
-- Returns coded{ code = 1, value = entries posted to the outbox }.
-- Safe to run twice: the second finds every field ended and the dependent settled.
local now = now_ms()
local P = dep_prefix(jobs)
local g = P .. 'dg:' .. id
if registered then redis.call('ZREM', dreg, id) end
local raw = redis.call('HGET', jobs, id)
local at = raw and has(string.byte(raw, 2), 64) and rec_extra(raw, 20)
if not at then return coded{ code = 1, value = 0 } end
local policy, results = string.byte(raw, at), string.byte(raw, at + 1) == 1
for i = 1, ends_n do
  local field, how, result = ends_field[i], ends_how[i], ends_result[i]
  if redis.call('HGET', g, field) == 'p' then
    redis.call('HSET', g, field, how)
    redis.call('HINCRBY', g, '\0n', -1)
    -- A result is kept while the dependent's results fit 1048576 (`\0rb`).
    if results and result ~= '' then
      if redis.call('HINCRBY', g, '\0rb', #result) <= 1048576 then
        redis.call('HSET', g, '\0r' .. field, result)
      else
        redis.call('HINCRBY', g, '\0rb', -#result)
      end
    end
    if how ~= 'o' then redis.call('HSETNX', g, '\0x', field .. '\0' .. how) end
  end
end
if not redis.call('ZSCORE', waiting, id) then return coded{ code = 1, value = 0 } end
local s = redis.call('HMGET', g, '\0n', '\0x')
local pending, failed = tonumber(s[1]) or 0, s[2]
local ending = nil
if failed and policy == 0 then
  local q, dep, how = string.match(failed, '^([^%z]*)%z([^%z]*)%z(.)$')
  local r = decode(raw)
  r.err = 'dependency ' .. q .. '/' .. dep .. ' ' .. (how == 'd' and 'dead' or 'cancelled')
  redis.call('ZREM', waiting, id)
  bury(jobs, dead, id, r, now)
  count(stat, now, 3, 1)
  ending = 'd'
elseif failed and policy == 1 then
  redis.call('ZREM', waiting, id)
  redis.call('HDEL', jobs, id)
  ending = 'c'
elseif pending <= 0 then
  redis.call('ZREM', waiting, id)
  local due = math.max(rec_due(raw), now)
  if due ~= rec_due(raw) then
    local r = decode(raw)
    r.due = due
    redis.call('HSET', jobs, id, encode(r))
  end
  wake_if_earlier(sched, wake, due)
  redis.call('ZADD', sched, due, id)
end
local posted = 0
if ending then
  local lflags = string.byte(redis.call('GETRANGE', stat, 1, 1)) or 0
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
    batch_end(bacc, raw, id, ending)
    batch_count(bm, bacc, now)
  end
  local dacc = {}
  dep_end(dacc, raw, id, ending)
  posted = dep_post(jobs, dacc, now)
end
return coded{ code = 1, value = posted }
