-- fill.lua: W4-shaped jobs (20-byte ids, a 24-byte header stand-in + the 100-byte W4 payload)
-- in one of the lab's two layouts. Lab data, not delayq's scripts.
--   zset: ZSET sched id -> due, HASH jobs id -> record (today's layout);
--   lane: LIST lane of entries (bucket u16, id length u8, id, record) in arrival order, the id
--         index HASH ix:<bucket> id -> sequence number (listpack while small), STRING lanehead
--         (the head's sequence number). Job i gets sequence number i and bucket i % buckets.
-- KEYS: none (the lab's own keys, on a private server). ARGV[1] layout (zset | lane), ARGV[2]
-- from, ARGV[3] to (job numbers), ARGV[4] bucket count (lane). Returns 1.
-- Run twice: the zset layout writes the same entries again (same sizes); the lane appends them
-- again (a lab fill runs once per FLUSHALL).
local layout, from, to, nb = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local pad = string.rep('x', 39)
for i = from, to - 1 do
  local id = string.format('1%019d', i)
  local rec = string.format('%024d', i)
    .. '{"orderId":"' .. id .. '","action":"cancel","pad":"' .. pad .. '"}'
  if layout == 'zset' then
    redis.call('ZADD', 'sched', 1000000 + i, id)
    redis.call('HSET', 'jobs', id, rec)
  else
    local b = i % nb
    redis.call('RPUSH', 'lane', struct.pack('>I2B', b, #id) .. id .. rec)
    redis.call('HSET', 'ix:' .. b, id, i)
  end
end
if layout == 'lane' then redis.call('SETNX', 'lanehead', 0) end
return 1
