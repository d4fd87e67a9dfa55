-- delayq script; constants from Rust written in (scripts.rs)
-- key_pause.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local khold = KEYS[1]
local kwait = KEYS[2]
local wake = KEYS[3]
local key = ARGV[2]
local until_ms = tonumber(ARGV[3])
local for_ms = tonumber(ARGV[4])
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + clock_offset_us
end
local function now_ms()
  return math.floor(now_us() / 1000)
end

-- key_pause.lua: holds one key's jobs in one shard until a time, or lifts the hold
-- (keyed.lua: a held key's due jobs are parked by the claims that reach them).
-- Keys (declared in transitions/key_pause.rs, which generates the locals):
-- khold     HASH key -> the end of its hold, ms
-- kwait     ZSET key -> when one of its parked jobs comes back
-- wake      channel of the queue's consumers (woken when a hold is lifted)
-- Arguments: key, until_ms (the hold's end, ms; 0 with for_ms 0: lift the hold), for_ms (the
-- hold's length from the store's clock, when > 0).
-- Returns the hold's end (ms; 0: no hold, lifted or already over).
-- Safe to run twice: the hold is set to the same end (for_ms counts from the second run's
-- clock: a little later), or lifted again.
local now = now_ms()
local t = until_ms
if for_ms > 0 then t = now + for_ms end
if t > now then
  redis.call('HSET', khold, key, t)
  redis.call('ZADD', kwait, t, key)
  return t
end
redis.call('HDEL', khold, key)
redis.call('ZADD', kwait, now, key)
redis.call('PUBLISH', wake, 0)
return 0
