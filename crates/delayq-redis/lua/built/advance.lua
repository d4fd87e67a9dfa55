-- delayq script; constants from Rust written in (scripts.rs)
-- advance.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local cronnext = KEYS[1]
local name = ARGV[2]
local expected = tonumber(ARGV[3])
local next_fire = tonumber(ARGV[4])

-- advance.lua: moves a schedule's next fire on, only while it is the one the ticker read (the
-- second step of a fire on a queue of several shards, after fire_shard.lua).
-- Keys (declared in transitions/advance.rs, which generates the locals):
-- cronnext  ZSET schedule name -> next fire ms
-- Arguments: name (the schedule), expected (the next fire the ticker read), next_fire (the next
-- fire to store).
-- Returns whether it moved it: false when the stored next fire is another (someone fired it
-- first, or the schedule changed or is gone).
-- Safe to run twice: the second run finds the next fire moved and answers false.
local cur = redis.call('ZSCORE', cronnext, name)
if not cur or tonumber(cur) ~= expected then
  return 0
end
redis.call('ZADD', cronnext, next_fire, name)
return 1
