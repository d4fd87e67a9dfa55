-- shard_settings.lua: stores one shard's rate and concurrency limits and the queue's retention of
-- completed jobs, or removes them (claim.lua and ack.lua apply them; layout in common.lua
-- above limits_read and queue_retention).
-- Keys (declared in transitions/shard_settings.rs, which generates the locals):
-- stat      STRING limit flags, limits and retention (and the paused flag and series)
-- wake      channel of the queue's consumers (woken: the limits they sleep on changed)
-- Arguments: per_s (tokens per second; 0: no rate limit), burst, mif (max_in_flight; 0:
-- none), keep (keep_done_ms) and dedupe (dedupe_ms; both 0: completed jobs are deleted),
-- lane_on (the queue has a one-delay lane: L_LANE), width (its time windows' width in ms; 0:
-- none; the u16 at S_WIDTH), key_mif (key_max_in_flight; 0: none), key_per_s and key_burst
-- (key_rate; 0: none): each key's limits (keyed.lua: key_limits).
-- Returns the flags byte it stored (L_PRIO and L_KEYS, which the queue's jobs set, are kept).
-- Safe to run twice: the second run stores the same values; the bucket keeps the tokens it
-- has (capped at the new burst) — only a shard that had no rate limit starts with a full one.
local flags = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
local now = now_us()
local new = bit.band(flags, L_PRIO) + bit.band(flags, L_KEYS)
if lane_on then new = new + L_LANE end
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
if key_mif > 0 or key_per_s > 0 then
  redis.call('SETRANGE', stat, S_KEYLIM, struct.pack('>I4I4d', key_mif, key_burst, key_per_s))
  new = new + L_KLIM
end
redis.call('BITFIELD', stat, 'SET', 'u8', S_FLAGS * 8, new)
redis.call('SETRANGE', stat, S_WIDTH, struct.pack('>H', width))
redis.call(PUBLISH, wake, 0)
return new
