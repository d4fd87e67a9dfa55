-- common.lua: helpers prepended to every delayq script (not a script on its own).
--
-- Record format v1 (the value of a job in the `jobs` hash), big-endian, via Redis's `struct`:
--   u8 version (=1) | u8 flags | u16 attempt | u16 max_attempts | u48 due_ms | u48 created_ms
--   [flags&1] u8 backoff kind | u32 base_ms | u32 cap_ms     (absent: the default policy)
--   [flags&2] u32 lease_ms                                     (absent: the consumer's lease)
--   [flags&4] u48 lease token                                  (present while leased)
--   [flags&8] u16 len | error bytes                            (last error, if any)
--   payload bytes (the rest)
-- The id is not in the record: it is the hash field and the sorted-set member.

local F_BACKOFF, F_LEASE, F_TOKEN, F_ERROR = 1, 2, 4, 8
-- Default backoff: exponential with jitter, 1 s doubling up to 10 min (Backoff::default).
local DEFAULT_BKIND, DEFAULT_BBASE, DEFAULT_BCAP = 2, 1000, 600000
local MAX_ERROR = 1024

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function has(flags, f)
  return bit.band(flags, f) ~= 0
end

local function decode(s)
  local r = {}
  local version, flags, pos
  version, flags, r.attempt, r.max_attempts, r.due, r.created, pos =
    struct.unpack('>BBHHI6I6', s)
  if version ~= 1 then
    error('delayq: unknown record version ' .. tostring(version))
  end
  if has(flags, F_BACKOFF) then
    r.bkind, r.bbase, r.bcap, pos = struct.unpack('>BI4I4', s, pos)
  end
  if has(flags, F_LEASE) then
    r.lease, pos = struct.unpack('>I4', s, pos)
  end
  if has(flags, F_TOKEN) then
    r.token, pos = struct.unpack('>I6', s, pos)
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

local function encode(r)
  local flags = 0
  local parts = {}
  if r.bkind then
    flags = flags + F_BACKOFF
    parts[#parts + 1] = struct.pack('>BI4I4', r.bkind, r.bbase, r.bcap)
  end
  if r.lease then
    flags = flags + F_LEASE
    parts[#parts + 1] = struct.pack('>I4', r.lease)
  end
  if r.token then
    flags = flags + F_TOKEN
    parts[#parts + 1] = struct.pack('>I6', r.token)
  end
  if r.err then
    local e = string.sub(r.err, 1, MAX_ERROR)
    flags = flags + F_ERROR
    parts[#parts + 1] = struct.pack('>H', #e) .. e
  end
  return struct.pack('>BBHHI6I6', 1, flags, r.attempt, r.max_attempts, r.due, r.created)
    .. table.concat(parts) .. r.payload
end

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

-- Due time from a schedule: mode 'n' now, 'd' delay in ms, 'a' absolute ms (past = now).
local function due_from(mode, t, now)
  if mode == 'd' then
    return now + t
  elseif mode == 'a' and t > now then
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
-- they are sleeping towards. Call before adding the job to `sched`.
local function wake_if_earlier(sched, wake, due)
  local head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
  if head[2] == nil or due < tonumber(head[2]) then
    redis.call('PUBLISH', wake, due)
  end
end

-- Checks a lease: returns the decoded record when `id` is leased with `token`, else nil.
local function leased_record(jobs, lease, id, token)
  if not redis.call('ZSCORE', lease, id) then
    return nil
  end
  local raw = redis.call('HGET', jobs, id)
  if not raw then
    return nil
  end
  local r = decode(raw)
  if r.token ~= token then
    return nil
  end
  return r
end

-- Acknowledges `k` pairs (id, token) found in `args` from index `from`: records of valid
-- leases are deleted. Returns 1 (acked) or 0 (lease lost, nothing changed) per pair.
local function ack_pairs(jobs, lease, args, from, k)
  local out, done = {}, {}
  for i = 0, k - 1 do
    local id = args[from + 2 * i]
    if leased_record(jobs, lease, id, tonumber(args[from + 2 * i + 1])) then
      done[#done + 1] = id
      out[#out + 1] = 1
    else
      out[#out + 1] = 0
    end
  end
  if #done > 0 then
    call_chunked('HDEL', jobs, done)
    call_chunked('ZREM', lease, done)
  end
  return out
end

-- Dead-letters a decoded record.
local function bury(jobs, dead, id, r, now)
  r.token = nil
  redis.call('HSET', jobs, id, encode(r))
  redis.call('ZADD', dead, now, id)
end

-- Flat reply of a job's public fields.
local function info(id, state, r, extra)
  return { id, state, r.attempt, r.max_attempts, r.due, r.created, extra or -1, r.err or false,
    r.payload }
end
