-- dead_purge.lua: deletes dead jobs, oldest first.
-- KEYS[1] dead   ZSET id -> failed_at ms
-- KEYS[2] jobs   HASH id -> record
-- ARGV[1] most jobs in this call
-- Returns the number deleted.
-- Safe to run twice: a second run deletes only jobs that died meanwhile (the caller asked
-- for all of them to go).
local dead, jobs = KEYS[1], KEYS[2]
local ids = redis.call('ZRANGE', dead, 0, tonumber(ARGV[1]) - 1)
if #ids == 0 then return 0 end
call_chunked('HDEL', jobs, ids)
call_chunked('ZREM', dead, ids)
return #ids
