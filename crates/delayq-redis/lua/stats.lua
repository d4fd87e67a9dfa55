-- stats.lua: counts of one queue (read only).
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] lease  ZSET id -> lease deadline ms
-- KEYS[3] dead   ZSET id -> failed_at ms
-- KEYS[4] stat   STRING paused flag, limits and series of counts
-- KEYS[5] done   ZSET id -> when its retention ends (ms)
-- KEYS[6] ready  ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities (scheduled and due)
-- KEYS[7] jobs   HASH id -> record
-- Returns { scheduled, due, due_next_minute, leased, dead, oldest_overdue_ms, paused (0|1),
--   waiting_on_limit (due jobs the shard's rate or max_in_flight holds back now), done }
-- Safe to run twice: it writes nothing.
local sched, lease, dead, stat, done, ready, jobs =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local now = now_ms()
local oldest = 0
local head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
if head[2] and tonumber(head[2]) <= now then oldest = now - tonumber(head[2]) end
local flags = redis.call('GETRANGE', stat, S_PAUSED, S_FLAGS)
local in_ready = redis.call('ZCARD', ready)
if in_ready > 0 then
  -- The longest-waiting job of `ready` is not its first (priorities): read a few.
  local first = redis.call('ZRANGE', ready, 0, 99)
  local raws = redis.call('HMGET', jobs, unpack(first))
  for i = 1, #raws do
    if raws[i] then oldest = math.max(oldest, now - rec_due(raws[i])) end
  end
end
local due = redis.call('ZCOUNT', sched, '-inf', now) + in_ready
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
  redis.call('ZCARD', sched) + in_ready,
  due,
  redis.call('ZCOUNT', sched, '(' .. now, now + 60000),
  leased,
  redis.call('ZCARD', dead),
  oldest,
  string.byte(flags, 1) == 1 and 1 or 0,
  waiting,
  redis.call('ZCARD', done),
}
