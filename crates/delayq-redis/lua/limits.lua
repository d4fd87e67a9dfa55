-- limits.lua: stores one shard's rate and concurrency limits and the queue's retention of
-- completed jobs, or removes them (claim.lua and ack.lua apply them; layout in common.lua
-- above limits_read and queue_retention).
-- KEYS[1] stat   STRING limit flags, limits and retention (and the paused flag and series)
-- KEYS[2] wake   channel of the queue's consumers (woken: the limits they sleep on changed)
-- ARGV[1] tokens per second (0: no rate limit), ARGV[2] burst, ARGV[3] max_in_flight (0: none),
-- ARGV[4] keep_done_ms, ARGV[5] dedupe_ms (both 0: completed jobs are deleted), ARGV[6] 1:
-- the queue has a one-delay lane (L_LANE), ARGV[7] the width of its time windows in ms (0:
-- none; the u16 at S_WIDTH)
-- Returns the flags byte it stored (L_PRIO, which the queue's jobs set, is kept).
-- Safe to run twice: the second run stores the same values; the bucket keeps the tokens it
-- has (capped at the new burst) — only a shard that had no rate limit starts with a full one.
local stat, wake = KEYS[1], KEYS[2]
local per_s, burst, mif = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local keep, dedupe = tonumber(ARGV[4]), tonumber(ARGV[5])
local flags = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
local now = now_us()
local new = bit.band(flags, L_PRIO)
if ARGV[6] == '1' then new = new + L_LANE end
if per_s > 0 or mif > 0 then
  local tokens = burst
  if bit.band(flags, L_ON) ~= 0 then
    local l = limits_read(stat, now)
    if l.per_s > 0 then tokens = math.min(l.tokens, burst) end
  end
  redis.call('SETRANGE', stat, S_LIMITS, struct.pack('>dI4I4dd', per_s, burst, mif, tokens, now))
  new = new + L_ON
end
if keep > 0 or dedupe > 0 then
  redis.call('SETRANGE', stat, S_RETAIN, struct.pack('>dd', keep, dedupe))
  new = new + L_RETAIN
end
redis.call('BITFIELD', stat, 'SET', 'u8', S_FLAGS * 8, new)
redis.call('SETRANGE', stat, S_WIDTH, struct.pack('>H', tonumber(ARGV[7] or 0)))
redis.call(PUBLISH, wake, 0)
return new
