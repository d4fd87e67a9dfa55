-- delayq script; constants from Rust written in (scripts.rs)
-- pause.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local stat = KEYS[1]
local wake = KEYS[2]
local paused = (ARGV[2] == '1')

-- pause.lua: pauses or resumes one shard of a queue (claim.lua leases nothing while paused).
-- Keys (declared in transitions/pause.rs, which generates the locals):
-- stat      STRING paused flag (a byte at 0) and series of counts
-- wake      channel of the queue's consumers
-- Arguments: paused (pause, or resume).
-- Returns whether the shard is paused after the call.
-- Safe to run twice: the flag is set or removed, whatever it was; a second resume only wakes
-- consumers once more (they find nothing new and sleep again).
if paused then
  redis.call('BITFIELD', stat, 'SET', 'u8', 0 * 8, 1)
  return 1
end
redis.call('BITFIELD', stat, 'SET', 'u8', 0 * 8, 0)
redis.call('PUBLISH', wake, 0)
return 0
