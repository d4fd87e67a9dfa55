-- common.lua: helpers prepended to every delayq script (not a script on its own), after the
-- prelude that `scripts.rs` generates from Rust: the record layout (HEADER, HEADER_LEN,
-- AT_ATTEMPT, AT_DUE, AT_TOKEN, F_LEASE, F_BACKOFF, F_ERROR, RECORD_VERSION), MAX_ERROR,
-- the default backoff (DEFAULT_BKIND, DEFAULT_BBASE, DEFAULT_BCAP), state codes (ST_*) and
-- reply codes (R_*), and PUBLISH: the command that publishes wake-ups ('PUBLISH' on one
-- server, 'SPUBLISH' on a Cluster).
--
-- The record (format v1, byte table in ARCHITECTURE.md, defined in record.rs) has a fixed
-- header so the hot paths (claim, ack) read and patch attempt and token without decoding the
-- record; the client decodes records it receives. The id is not in the record: it is the hash
-- field and the sorted-set member.

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
  return (struct.unpack('>I6', rec, AT_TOKEN))
end

local function rec_attempt(rec)
  return (struct.unpack('>H', rec, AT_ATTEMPT))
end

local function rec_due(rec)
  return (struct.unpack('>I6', rec, AT_DUE))
end

local function rec_lease(rec, default)
  if has(string.byte(rec, 2), F_LEASE) then
    return (struct.unpack('>I4', rec, HEADER_LEN + 1))
  end
  return default
end

-- The record with a new attempt count and lease token, everything else unchanged.
local function rec_claimed(rec, attempt, token)
  return string.sub(rec, 1, AT_ATTEMPT - 1) .. struct.pack('>H', attempt)
    .. string.sub(rec, AT_ATTEMPT + 2, AT_TOKEN - 1) .. struct.pack('>I6', token)
    .. string.sub(rec, HEADER_LEN + 1)
end

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
    -- Callers cut errors on a character boundary first (limits::truncate_error); this cut
    -- only bounds what a record can hold.
    local e = string.sub(r.err, 1, MAX_ERROR)
    flags = flags + F_ERROR
    parts[#parts + 1] = struct.pack('>H', #e) .. e
  end
  return struct.pack(HEADER, RECORD_VERSION, flags, r.attempt, r.max_attempts, r.due, r.created,
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
    redis.call(PUBLISH, wake, due)
  end
end

-- The raw record of `id` when it is leased with `token`, else nil and why: R_MISSING (no
-- such job) or R_LOST (another lease, or not leased). A record carries a non-zero token
-- exactly while it is leased (every transition out of `lease` clears it), and tokens are never
-- reused, so the token alone proves the lease.
local function leased_raw(jobs, id, token)
  local raw = redis.call('HGET', jobs, id)
  if not raw then
    return nil, R_MISSING
  end
  if token == nil or token == 0 or rec_token(raw) ~= token then
    return nil, R_LOST
  end
  return raw
end

-- The state code of `id` by the sorted set that holds it, or nil when it does not exist.
local function state_of(sched, lease, dead, id)
  if redis.call('ZSCORE', sched, id) then return ST_SCHEDULED end
  if redis.call('ZSCORE', lease, id) then return ST_LEASED end
  if redis.call('ZSCORE', dead, id) then return ST_DEAD end
  return nil
end

-- The reply code refusing an operation on a job in state `st` (nil: missing).
local function refusal(st)
  if st == ST_SCHEDULED then return R_SCHEDULED end
  if st == ST_LEASED then return R_LEASED end
  if st == ST_DEAD then return R_DEAD end
  return R_MISSING
end

-- Acknowledges `k` pairs (id, token) found in `args` from index `from`: records of valid
-- leases are deleted. Returns per pair R_OK, R_LOST or R_MISSING (nothing changed).
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
    if not raw then
      out[i] = R_MISSING
    elseif token ~= 0 and rec_token(raw) == token then
      done[#done + 1] = ids[i]
      out[i] = R_OK
    else
      out[i] = R_LOST
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

-- Throughput and lateness (delayq::series): the shard's `stat` hash holds one packed interval
-- per ring slot (SERIES_FORMAT: interval number, then enqueued, started, completed, retried,
-- dead and the LATE_EDGES buckets) and the totals under 't' (interval number 0). Scripts that
-- change state add their counts once per call: one HMGET and one HSET, whatever the batch.

-- The lateness bucket (1-based) of `ms`.
local function late_bucket(ms)
  for i = 1, #LATE_EDGES do
    if ms <= LATE_EDGES[i] then return i end
  end
  return #LATE_EDGES + 1
end

-- The packed interval `old` (or a fresh one when it is absent or of another interval) plus
-- the counts `c` = { e, s, c, r, d, late = { bucket = n } } (absent: 0).
local function series_add(old, stamp, c)
  local v
  if old then
    v = { struct.unpack(SERIES_FORMAT, old) }
  end
  if not v or v[1] ~= stamp then
    v = { stamp }
    for i = 2, SERIES_VALUES do v[i] = 0 end
  end
  v[2] = v[2] + (c.e or 0)
  v[3] = v[3] + (c.s or 0)
  v[4] = v[4] + (c.c or 0)
  v[5] = v[5] + (c.r or 0)
  v[6] = v[6] + (c.d or 0)
  if c.late then
    for b, n in pairs(c.late) do v[6 + b] = v[6 + b] + n end
  end
  return struct.pack(SERIES_FORMAT, unpack(v, 1, SERIES_VALUES))
end

-- The field of the ring slot of `now` and its interval number.
local function series_slot(now)
  local n = math.floor(now / SERIES_INTERVAL)
  return tostring(n % SERIES_SLOTS), n
end

-- Writes counts `c` into now's interval and the totals; `cur` = { slot value, totals } when
-- the caller read them already (claim reads them with the paused flag), else nil.
local function count(stat, now, c, cur)
  local slot, n = series_slot(now)
  if cur == nil then
    cur = redis.call('HMGET', stat, slot, 't')
  end
  redis.call('HSET', stat, slot, series_add(cur[1], n, c), 't', series_add(cur[2], 0, c))
end
