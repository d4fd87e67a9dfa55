-- common.lua: helpers prepended to every delayq script (not a script on its own).
--
-- Record format v1: the value of a job in the `jobs` hash, big-endian (Redis's `struct`).
--   byte 1   u8  version (= 1)
--   byte 2   u8  flags: 1 lease_ms present, 2 backoff present, 4 last error present
--   byte 3   u16 attempt (deliveries so far)
--   byte 5   u16 max_attempts
--   byte 7   u48 due_ms
--   byte 13  u48 created_ms
--   byte 19  u48 lease token (0 when not leased)
--   byte 25  [flags&1] u32 lease_ms  [flags&2] u8 kind, u32 base_ms, u32 cap_ms
--            [flags&4] u16 length, error bytes
--            then the payload (the rest)
-- The fixed 24-byte header lets the hot paths (claim, ack) read and patch attempt and token
-- without decoding the record; the client decodes records it receives (record.rs). The id is
-- not in the record: it is the hash field and the sorted-set member.

local HEADER = '>BBHHI6I6I6'
local F_LEASE, F_BACKOFF, F_ERROR = 1, 2, 4
-- Default backoff: exponential with jitter, 1 s doubling up to 10 min (Backoff::default).
local DEFAULT_BKIND, DEFAULT_BBASE, DEFAULT_BCAP = 2, 1000, 600000
local MAX_ERROR = 1024

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
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

local function rec_lease(rec, default)
  if has(string.byte(rec, 2), F_LEASE) then
    return (struct.unpack('>I4', rec, 25))
  end
  return default
end

-- The record with a new attempt count and lease token, everything else unchanged.
local function rec_claimed(rec, attempt, token)
  return string.sub(rec, 1, 2) .. struct.pack('>H', attempt) .. string.sub(rec, 5, 18)
    .. struct.pack('>I6', token) .. string.sub(rec, 25)
end

-- Full decode and encode, for the paths that change more than the header.
local function decode(s)
  local r = {}
  local version, flags, pos
  version, flags, r.attempt, r.max_attempts, r.due, r.created, r.token, pos =
    struct.unpack(HEADER, s)
  if version ~= 1 then
    error('delayq: unknown record version ' .. tostring(version))
  end
  if has(flags, F_LEASE) then
    r.lease, pos = struct.unpack('>I4', s, pos)
  end
  if has(flags, F_BACKOFF) then
    r.bkind, r.bbase, r.bcap, pos = struct.unpack('>BI4I4', s, pos)
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
  if r.lease then
    flags = flags + F_LEASE
    parts[#parts + 1] = struct.pack('>I4', r.lease)
  end
  if r.bkind then
    flags = flags + F_BACKOFF
    parts[#parts + 1] = struct.pack('>BI4I4', r.bkind, r.bbase, r.bcap)
  end
  if r.err then
    local e = string.sub(r.err, 1, MAX_ERROR)
    flags = flags + F_ERROR
    parts[#parts + 1] = struct.pack('>H', #e) .. e
  end
  return struct.pack(HEADER, 1, flags, r.attempt, r.max_attempts, r.due, r.created,
    r.token or 0) .. table.concat(parts) .. r.payload
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

-- The raw record of `id` when it is leased with `token`, else nil. A record carries a
-- non-zero token exactly while it is leased (every transition out of `lease` clears it), and
-- tokens are never reused, so the token alone proves the lease.
local function leased_raw(jobs, id, token)
  if token == nil or token == 0 then
    return nil
  end
  local raw = redis.call('HGET', jobs, id)
  if raw and rec_token(raw) == token then
    return raw
  end
  return nil
end

-- Acknowledges `k` pairs (id, token) found in `args` from index `from`: records of valid
-- leases are deleted. Returns 1 (acked) or 0 (lease lost, nothing changed) per pair.
local function ack_pairs(jobs, lease, args, from, k)
  local out, done = {}, {}
  if k == 0 then
    return out
  end
  local ids = {}
  for i = 0, k - 1 do
    ids[i + 1] = args[from + 2 * i]
  end
  local raws = redis.call('HMGET', jobs, unpack(ids))
  for i = 1, k do
    local token = tonumber(args[from + 2 * i - 1])
    local raw = raws[i]
    if raw and token ~= 0 and rec_token(raw) == token then
      done[#done + 1] = ids[i]
      out[i] = 1
    else
      out[i] = 0
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
  r.token = 0
  redis.call('HSET', jobs, id, encode(r))
  redis.call('ZADD', dead, now, id)
end
