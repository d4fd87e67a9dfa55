-- fill_lane.lua: the one-delay lane, W4-shaped: LIST lane of entries (bucket u16, id length
-- u8, id, record: a 24-byte header stand-in + the 100-byte W4 payload) in arrival order; the id
-- index HASH ix:<bucket> id -> sequence number (listpack while small); STRING lanehead (the
-- head's sequence number). Lab data, not delayq's scripts.
-- KEYS: none (the lab's own keys, on a private server). ARGV[1] from, ARGV[2] to (job numbers;
-- job i gets sequence number i), ARGV[3] bucket count. Returns 1. Run twice it appends the
-- entries again (a lab fill runs once per FLUSHALL).
local from, to, nb = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local pad = string.rep('x', 39)
for i = from, to - 1 do
  local id = string.format('1%019d', i)
  local payload = '{"orderId":"' .. id .. '","action":"cancel","pad":"' .. pad .. '"}'
  local rec = string.format('%024d', i) .. payload
  local b = i % nb
  redis.call('RPUSH', 'lane', struct.pack('>I2B', b, #id) .. id .. rec)
  redis.call('HSET', 'ix:' .. b, id, i)
end
redis.call('SETNX', 'lanehead', 0)
return 1
