-- stats.lua: counts of one queue (read only).
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] lease  ZSET id -> lease deadline ms
-- KEYS[3] dead   ZSET id -> failed_at ms
-- KEYS[4] stat   STRING paused flag and series of counts
-- Returns { scheduled, due, due_next_minute, leased, dead, oldest_overdue_ms, paused (0|1),
--   waiting_on_limit (due jobs the shard's rate or max_in_flight holds back now) }
-- Safe to run twice: it writes nothing.
local sched, lease, dead, stat = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = now_ms()
local oldest = 0
local head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
if head[2] and tonumber(head[2]) <= now then oldest = now - tonumber(head[2]) end
local flags = redis.call('GETRANGE', stat, S_PAUSED, S_FLAGS)
local due = redis.call('ZCOUNT', sched, '-inf', now)
local leased = redis.call('ZCARD', lease)
local waiting = 0
if bit.band(string.byte(flags, 2) or 0, L_ON) ~= 0 then
  local l = limits_read(stat, now_us())
  local room = due
  if l.per_s > 0 then room = math.min(room, math.floor(l.tokens)) end
  if l.mif > 0 then room = math.min(room, math.max(0, l.mif - leased)) end
  waiting = due - room
end
return {
  redis.call('ZCARD', sched),
  due,
  redis.call('ZCOUNT', sched, '(' .. now, now + 60000),
  leased,
  redis.call('ZCARD', dead),
  oldest,
  string.byte(flags, 1) == 1 and 1 or 0,
  waiting,
}
