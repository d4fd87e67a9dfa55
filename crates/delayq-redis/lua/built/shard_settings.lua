-- delayq script; constants from Rust written in (scripts.rs)
-- shard_settings.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local stat = KEYS[1]
local wake = KEYS[2]
local per_s = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local mif = tonumber(ARGV[4])
local keep = tonumber(ARGV[5])
local dedupe = tonumber(ARGV[6])
local lane_on = (ARGV[7] == '1')
local width = tonumber(ARGV[8])
local key_mif = tonumber(ARGV[9])
local key_per_s = tonumber(ARGV[10])
local key_burst = tonumber(ARGV[11])
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + clock_offset_us
end
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

-- shard_settings.lua: stores one shard's rate and concurrency limits and the queue's retention of
-- completed jobs, or removes them (claim.lua and ack.lua apply them; layout in common.lua
-- above limits_read and queue_retention).
-- Keys (declared in transitions/shard_settings.rs, which generates the locals):
-- stat      STRING limit flags, limits and retention (and the paused flag and series)
-- wake      channel of the queue's consumers (woken: the limits they sleep on changed)
-- Arguments: per_s (tokens per second; 0: no rate limit), burst, mif (max_in_flight; 0:
-- none), keep (keep_done_ms) and dedupe (dedupe_ms; both 0: completed jobs are deleted),
-- lane_on (the queue has a one-delay lane: 16), width (its time windows' width in ms; 0:
-- none; the u16 at 2), key_mif (key_max_in_flight; 0: none), key_per_s and key_burst
-- (key_rate; 0: none): each key's limits (keyed.lua: key_limits).
-- Returns the flags byte it stored (8 and 32, which the queue's jobs set, are kept).
-- Safe to run twice: the second run stores the same values; the bucket keeps the tokens it
-- has (capped at the new burst) — only a shard that had no rate limit starts with a full one.
local flags = string.byte(redis.call('GETRANGE', stat, 1, 1)) or 0
local now = now_us()
local new = bit.band(flags, 8) + bit.band(flags, 32)
if lane_on then new = new + 16 end
if per_s > 0 or mif > 0 then
  local tokens = burst
  if bit.band(flags, 1) ~= 0 then
    local l = limits_read(stat, now)
    if l.per_s > 0 then tokens = math.min(l.tokens, burst) end
  end
  redis.call('SETRANGE', stat, 30408, struct.pack('>dI4I4dd', per_s, burst, mif, tokens, now))
  new = new + 1
end
if keep > 0 or dedupe > 0 then
  redis.call('SETRANGE', stat, 30440, struct.pack('>dd', keep, dedupe))
  new = new + 4
end
if key_mif > 0 or key_per_s > 0 then
  redis.call('SETRANGE', stat, 30456, struct.pack('>I4I4d', key_mif, key_burst, key_per_s))
  new = new + 64
end
redis.call('BITFIELD', stat, 'SET', 'u8', 1 * 8, new)
redis.call('SETRANGE', stat, 2, struct.pack('>H', width))
redis.call('PUBLISH', wake, 0)
return new
