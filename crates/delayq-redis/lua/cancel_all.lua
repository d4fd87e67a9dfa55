-- cancel_all.lua: cancels waiting jobs of one kind, a bounded number per call.
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] jobs   HASH id -> record
-- KEYS[3] ready  ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- ARGV[1] 'd' due jobs (due <= now) | 's' scheduled jobs (due later than now)
-- ARGV[2] most jobs in this call
-- Returns the number cancelled (fewer than ARGV[2]: none of that kind is left).
-- Safe to run twice: a second run cancels only jobs of that kind that exist then (the caller
-- asked for all of them to go).
local sched, jobs, ready = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
local ids
if ARGV[1] == 'd' then
  -- Due jobs of a queue with priorities wait in `ready` (all of them due).
  ids = redis.call('ZRANGE', ready, 0, tonumber(ARGV[2]) - 1)
  if #ids > 0 then
    call_chunked('HDEL', jobs, ids)
    call_chunked('ZREM', ready, ids)
    return #ids
  end
  ids = redis.call('ZRANGEBYSCORE', sched, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
else
  ids = redis.call('ZRANGEBYSCORE', sched, '(' .. now, '+inf', 'LIMIT', 0, tonumber(ARGV[2]))
end
if #ids == 0 then return 0 end
call_chunked('HDEL', jobs, ids)
call_chunked('ZREM', sched, ids)
return #ids
