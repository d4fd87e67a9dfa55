-- pause.lua: pauses or resumes one shard of a queue (claim.lua leases nothing while paused).
-- KEYS[1] stat   STRING paused flag (a byte at S_PAUSED) and series of counts
-- KEYS[2] wake   channel of the queue's consumers
-- ARGV[1] '1' pause | '0' resume
-- Returns 1 when the shard is paused after the call, else 0.
-- Safe to run twice: the flag is set or removed, whatever it was; a second resume only wakes
-- consumers once more (they find nothing new and sleep again).
local stat, wake = KEYS[1], KEYS[2]
if ARGV[1] == '1' then
  redis.call('BITFIELD', stat, 'SET', 'u8', S_PAUSED * 8, 1)
  return 1
end
redis.call('BITFIELD', stat, 'SET', 'u8', S_PAUSED * 8, 0)
redis.call(PUBLISH, wake, 0)
return 0
