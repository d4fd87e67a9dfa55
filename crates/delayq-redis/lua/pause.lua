-- pause.lua: pauses or resumes one shard of a queue (claim.lua leases nothing while paused).
-- KEYS[1] stat   HASH p present while paused
-- KEYS[2] wake   channel of the queue's consumers
-- ARGV[1] '1' pause | '0' resume
-- Returns 1 when the shard is paused after the call, else 0.
-- Safe to run twice: the flag is set or removed, whatever it was; a second resume only wakes
-- consumers once more (they find nothing new and sleep again).
local stat, wake = KEYS[1], KEYS[2]
if ARGV[1] == '1' then
  redis.call('HSET', stat, 'p', 1)
  return 1
end
redis.call('HDEL', stat, 'p')
redis.call(PUBLISH, wake, 0)
return 0
