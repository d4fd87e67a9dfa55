-- dead_list.lua: a page of dead jobs, oldest failure first (read only).
-- KEYS[1] dead   ZSET id -> failed_at ms
-- KEYS[2] jobs   HASH id -> record
-- ARGV[1] offset, ARGV[2] limit
-- Returns a flat list, 3 per job: id, failed_at ms, record.
-- Safe to run twice: it writes nothing.
local dead, jobs = KEYS[1], KEYS[2]
local page = redis.call('ZRANGE', dead, ARGV[1], tonumber(ARGV[1]) + tonumber(ARGV[2]) - 1,
  'WITHSCORES')
local out = {}
for i = 1, #page, 2 do
  local raw = redis.call('HGET', jobs, page[i])
  if raw then
    out[#out + 1] = page[i]
    out[#out + 1] = tonumber(page[i + 1])
    out[#out + 1] = raw
  end
end
return out
