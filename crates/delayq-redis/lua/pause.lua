-- pause.lua: pauses or resumes one shard of a queue (claim.lua leases nothing while paused).
-- Keys (declared in transitions/pause.rs, which generates the locals):
-- stat      STRING paused flag (a byte at S_PAUSED) and series of counts
-- wake      channel of the queue's consumers
-- Arguments: paused (pause, or resume).
-- Returns whether the shard is paused after the call.
-- Safe to run twice: the flag is set or removed, whatever it was; a second resume only wakes
-- consumers once more (they find nothing new and sleep again).
if paused then
  redis.call('BITFIELD', stat, 'SET', 'u8', S_PAUSED * 8, 1)
  return 1
end
redis.call('BITFIELD', stat, 'SET', 'u8', S_PAUSED * 8, 0)
redis.call(PUBLISH, wake, 0)
return 0
