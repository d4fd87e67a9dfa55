-- advance.lua: moves a schedule's next fire on, only while it is the one the ticker read (the
-- second step of a fire on a queue of several shards, after fire_shard.lua).
-- KEYS[1] cronnext  ZSET schedule name -> next fire ms
-- ARGV[1] schedule name, ARGV[2] the next fire the ticker read, ARGV[3] the next fire to store
-- Returns 1 when it moved it, 0 when the stored next fire is another (someone fired it first,
-- or the schedule changed or is gone).
-- Safe to run twice: the second run finds the next fire moved and answers 0.
local cronnext, name = KEYS[1], ARGV[1]
local cur = redis.call('ZSCORE', cronnext, name)
if not cur or tonumber(cur) ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', cronnext, ARGV[3], name)
return 1
