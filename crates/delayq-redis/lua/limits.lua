-- limits.lua: stores one shard's rate and concurrency limits, or removes them (claim.lua
-- enforces them; layout in common.lua above limits_read).
-- KEYS[1] stat   STRING limit flags and limits (and the paused flag and series of counts)
-- KEYS[2] wake   channel of the queue's consumers (woken: the limits they sleep on changed)
-- ARGV[1] tokens per second (0: no rate limit), ARGV[2] burst, ARGV[3] max_in_flight (0: none)
-- Returns 1 when the shard has limits after the call, else 0.
-- Safe to run twice: the second run stores the same limits; the bucket keeps the tokens it
-- has (capped at the new burst) — only a shard that had no rate limit starts with a full one.
local stat, wake = KEYS[1], KEYS[2]
local per_s, burst, mif = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local flags = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
redis.call(PUBLISH, wake, 0)
if per_s == 0 and mif == 0 then
  redis.call('BITFIELD', stat, 'SET', 'u8', S_FLAGS * 8, 0)
  return 0
end
local now = now_us()
local tokens = burst
if bit.band(flags, L_ON) ~= 0 then
  local l = limits_read(stat, now)
  if l.per_s > 0 then tokens = math.min(l.tokens, burst) end
end
redis.call('SETRANGE', stat, S_LIMITS, struct.pack('>dI4I4dd', per_s, burst, mif, tokens, now))
redis.call('BITFIELD', stat, 'SET', 'u8', S_FLAGS * 8, L_ON)
return 1
