-- delayq script; constants from Rust written in (scripts.rs)
-- dep_wait.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local jobs = KEYS[1]
local waiting = KEYS[2]
local stat = KEYS[3]
local done = KEYS[4]
local dreg = KEYS[5]
local id = ARGV[2]
local spec = ARGV[3]
local deps_n = (#ARGV - 3) / 1
local deps_field = {}
for i = 1, deps_n do local a = 4 + (i - 1) * 1 deps_field[i] = ARGV[a + 0] end
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
-- The prefix of this shard's keys (`dq:{q}:`), from one of them (`jobs`).
local function dep_prefix(jobs)
  return string.sub(jobs, 1, -5)
end
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

-- dep_wait.lua: enqueues one job that waits for other jobs (deps.lua, at the top): it is
-- written waiting, with every dependency pending, and noted as being registered.
-- Keys (declared in transitions/dep_wait.rs, which generates the locals):
-- jobs      HASH id -> record
-- waiting   ZSET id -> due_ms: jobs waiting for their dependencies
-- stat      STRING flags (32, 8 for a job with a key or a priority) and series
-- done      ZSET id -> when its retention ends: completed jobs kept as done
-- dreg      ZSET id -> ms: dependents whose waiters are not all registered yet (the backend
--           registers them at once; a sweep finishes what a crash left)
-- Arguments: id, spec (as enqueue.lua's: a flags byte, then the record with 20), then
-- the tail `deps` of field (`<queue>\0<id>` of each dependency).
-- Returns coded{ code, value }: 1 (created) | 4 | -6 (kept as done within its
-- dedupe window), and the job's due time (ms).
-- Safe to run twice: a second run finds the job and answers 4, writing nothing.
local now = now_ms()
local mode = string.byte(spec, 1)
local due = due_from(mode, struct.unpack('>I6', spec, 1 + 7), now)
local stored = redis.call('HGET', jobs, id)
if stored then
  if has(string.byte(stored, 2), 128) and decode(stored).dedupe_until <= now then
    -- Done, its dedupe window over: the id is free again.
    redis.call('ZREM', done, id)
  else
    local code = has(string.byte(stored, 2), 128) and -6 or 4
    return coded{ code = code, value = rec_due(stored) }
  end
end
local rec = string.sub(spec, 2, 7) .. struct.pack('>I6I6', due, now)
  .. string.sub(spec, 1 + 19)
redis.call('HSET', jobs, id, rec)
redis.call('ZADD', waiting, due, id)
local g = { '\0n', deps_n }
for i = 1, deps_n do
  g[#g + 1] = deps_field[i]
  g[#g + 1] = 'p'
end
call_chunked('HSET', dep_prefix(jobs) .. 'dg:' .. id, g)
redis.call('ZADD', dreg, now, id)
-- A key or a priority marks the queue as an enqueue does (keyed.lua; common.lua: promote),
-- and a keyed job is in its key's index (keyed.lua, above key_index_add).
local k, prio = rec_kp(rec)
local f = string.byte(redis.call('GETRANGE', stat, 1, 1)) or 0
local add = 0
if k ~= '' then
  redis.call('ZADD', dep_prefix(jobs) .. 'kj:' .. k, 0, id)
  if bit.band(f, 32) == 0 then add = add + 32 end
end
if prio ~= 5 and bit.band(f, 8) == 0 then add = add + 8 end
if add > 0 then redis.call('BITFIELD', stat, 'SET', 'u8', 1 * 8, f + add) end
count(stat, now, 0, 1)
return coded{ code = 1, value = due }
