-- stats.lua: counts of one queue (read only).
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] lease  ZSET id -> lease deadline ms
-- KEYS[3] dead   ZSET id -> failed_at ms
-- KEYS[4] stat   STRING paused flag and series of counts
-- Returns { scheduled, due, due_next_minute, leased, dead, oldest_overdue_ms, paused (0|1) }
-- Safe to run twice: it writes nothing.
local sched, lease, dead, stat = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = now_ms()
local oldest = 0
local head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
if head[2] and tonumber(head[2]) <= now then oldest = now - tonumber(head[2]) end
return {
  redis.call('ZCARD', sched),
  redis.call('ZCOUNT', sched, '-inf', now),
  redis.call('ZCOUNT', sched, '(' .. now, now + 60000),
  redis.call('ZCARD', lease),
  redis.call('ZCARD', dead),
  oldest,
  string.byte(redis.call('GETRANGE', stat, S_PAUSED, S_PAUSED)) == 1 and 1 or 0,
}
