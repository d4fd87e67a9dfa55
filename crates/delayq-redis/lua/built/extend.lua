#!lua flags=allow-oom
-- delayq script; constants from Rust written in (scripts.rs)
-- extend.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local lease = KEYS[1]
local jobs = KEYS[2]
local lane = KEYS[3]
local lanemeta = KEYS[4]
local cxl = KEYS[5]
local ix_n = tonumber(ARGV[2])
local ix_at = 6 -- ix: KEYS[ix_at] .. KEYS[ix_at + ix_n - 1]
local id = ARGV[3]
local token = tonumber(ARGV[4])
local lease_ms = tonumber(ARGV[5])
local function coded(t) return { t.code, t.value } end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + clock_offset_us
end
local function now_ms()
  return math.floor(now_us() / 1000)
end
-- Fast accessors of the fixed header.
local function rec_token(rec)
  return (struct.unpack('>I6', rec, 19))
end
-- Whether the lease (`id`, `token`) was ended by a cancel with `running`, which `cxl`
-- remembers (cancel.lua): asked only about a lease whose job is missing (leased_raw,
-- ack_pairs), so a path that finds its lease pays nothing for it.
local function cancelled_lease(cxl, id, token)
  return token ~= 0 and redis.call('ZSCORE', cxl, string.format('%d', token) .. ':' .. id) ~= false
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

-- extend.lua: moves a lease deadline to now + lease_ms.
-- Keys (declared in transitions/extend.rs, which generates the locals):
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- cxl       ZSET `<token>:<id>` -> until when: leases cancelled while they ran (cancel.lua)
-- ix        (tail; a queue with a lane only) the id's index bucket `ix:<b>`
-- Arguments: id, token, lease_ms.
-- Returns coded{ code, value }: 1 and the new deadline (ms), or -2 / -8
-- (cancelled while it ran) / -1 (nothing changed).
-- Flag allow-oom: a full store (`maxmemory`, noeviction) still extends leases — the write
-- replaces a score and needs no memory, and refusing it would make long handlers lose their
-- jobs to other consumers.
-- Safe to run twice: it sets the deadline from now; a second run only moves it a little later.
local raw, why = leased_raw(jobs, id, token,
  ix_n > 0 and { lane = lane, meta = lanemeta, ix = KEYS[ix_at] }, cxl)
if not raw then
  return coded{ code = why, value = 0 }
end
local deadline = now_ms() + lease_ms
redis.call('ZADD', lease, deadline, id)
return coded{ code = 1, value = deadline }
