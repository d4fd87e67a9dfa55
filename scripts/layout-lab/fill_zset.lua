-- fill_zset.lua: today's layout, W4-shaped: ZSET sched id -> due, HASH jobs id -> record
-- (a 24-byte header stand-in + the 100-byte W4 payload). Lab data, not delayq's scripts.
-- KEYS: none (the lab's own keys, on a private server). ARGV[1] from, ARGV[2] to (job numbers).
-- Returns 1. Run twice it writes the same entries again (same sizes).
local from, to = tonumber(ARGV[1]), tonumber(ARGV[2])
local pad = string.rep('x', 39)
for i = from, to - 1 do
  local id = string.format('1%019d', i)
  local payload = '{"orderId":"' .. id .. '","action":"cancel","pad":"' .. pad .. '"}'
  redis.call('ZADD', 'sched', 1000000 + i, id)
  redis.call('HSET', 'jobs', id, string.format('%024d', i) .. payload)
end
return 1
