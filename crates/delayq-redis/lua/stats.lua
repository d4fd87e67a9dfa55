-- stats.lua: counts of one queue (read only).
-- Keys (declared in transitions/stats.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- dead      ZSET id -> failed_at ms
-- stat      STRING paused flag, limits and series of counts
-- done      ZSET id -> when its retention ends (ms)
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
--           (scheduled and due)
-- jobs      HASH id -> record
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- waiting   ZSET id -> due_ms: jobs waiting for their dependencies
-- The lane's time windows (lane.lua: win_key) add their live jobs (`lanemeta`'s `wn`); of
-- those in windows that start by the end of the next minute, a window wholly due, or wholly
-- due within the minute, counts whole (its length less its tombstones, `<lane>:t`), one
-- across either edge, and the first due one (the oldest overdue job), are read.
-- Returns shard_stats{ scheduled, due, due_next_minute, leased, dead, oldest_overdue_ms,
--   paused, waiting_on_limit (due jobs the shard's rate or max_in_flight holds back now),
--   done, awaiting (jobs waiting for their dependencies) }
-- Safe to run twice: it writes nothing.
local lmeta, lgone = lanemeta, lanegone
local now = now_ms()
local oldest = 0
local head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
if head[2] and tonumber(head[2]) <= now then oldest = now - tonumber(head[2]) end
-- The lane's live entries: all, due, due within a minute (positions by due time, less the
-- cancelled ones among them).
local in_lane, lane_due_now, lane_minute = 0, 0, 0
local len = redis.call('LLEN', lane)
if len > 0 then
  local h, b = lane_hb(lmeta)
  local p = lane_pos(lane, len, now)
  local q = lane_pos(lane, len, now + 60000)
  local dead_due = lane_tombs(lgone, b, h, h + p - 1)
  in_lane = len - lane_tombs(lgone, b, h, h + len - 1)
  lane_due_now = p - dead_due
  lane_minute = q - p - lane_tombs(lgone, b, h + p, h + q - 1)
  if lane_due_now > 0 then
    -- The first live entry: the first clear bit from the head's on (the first bit past the
    -- bitmap's end when every bit from there to its end is set).
    local first = 0
    if dead_due > 0 then
      local at = redis.call('BITPOS', lgone, 0, h - b, h - b + p - 1, 'BIT')
      if at < 0 then at = 8 * redis.call('STRLEN', lgone) end
      first = at - (h - b)
    end
    oldest = math.max(oldest, now - lane_due(redis.call('LINDEX', lane, first)))
  end
end
local flags = redis.call('GETRANGE', stat, S_PAUSED, S_WIDTH + 1)
local W = win_width(flags, S_PAUSED)
local in_win, win_due, win_minute = 0, 0, 0
if W > 0 then in_win = tonumber(redis.call('HGET', lmeta, 'wn') or 0) end
if in_win > 0 then
  local minute = now + 60000
  local near = redis.call('ZRANGEBYSCORE', wins_key(lane), '-inf', minute)
  local first_due = true
  for i = 1, #near, 1000 do
    local part = { unpack(near, i, math.min(i + 999, #near)) }
    local tombs = redis.call('HMGET', wtombs_key(lane), unpack(part))
    for j, m in ipairs(part) do
      local s = tonumber(m)
      local last = s + W - 1
      if (s <= now and (last > now or first_due)) or (s <= minute and last > minute) then
        for _, e in ipairs(redis.call('LRANGE', win_key(lane, m), 0, -1)) do
          if not lane_dead(e) then
            local _, _, rec = win_entry(e)
            local d = rec_due(rec)
            if d <= now then
              win_due = win_due + 1
              oldest = math.max(oldest, now - d)
            elseif d <= minute then
              win_minute = win_minute + 1
            end
          end
        end
      else
        local n = redis.call('LLEN', win_key(lane, m)) - tonumber(tombs[j] or 0)
        if last <= now then win_due = win_due + n else win_minute = win_minute + n end
      end
      if s <= now then first_due = false end
    end
  end
end
local in_ready = redis.call('ZCARD', ready)
if in_ready > 0 then
  -- The longest-waiting job of `ready` is not its first (priorities): read a few.
  local first = redis.call('ZRANGE', ready, 0, 99)
  local raws = redis.call('HMGET', jobs, unpack(first))
  for i = 1, #raws do
    if raws[i] then oldest = math.max(oldest, now - rec_due(raws[i])) end
  end
end
local due = redis.call('ZCOUNT', sched, '-inf', now) + in_ready + lane_due_now + win_due
local leased = redis.call('ZCARD', lease)
local held = 0
if bit.band(string.byte(flags, 2) or 0, L_ON) ~= 0 then
  local l = limits_read(stat, now_us())
  local room = due
  if l.per_s > 0 then room = math.min(room, math.floor(l.tokens)) end
  if l.mif > 0 then room = math.min(room, math.max(0, l.mif - leased)) end
  held = due - room
end
return shard_stats{
  scheduled = redis.call('ZCARD', sched) + in_ready + in_lane + in_win,
  due = due,
  due_next_minute = redis.call('ZCOUNT', sched, '(' .. now, now + 60000) + lane_minute + win_minute,
  leased = leased,
  dead = redis.call('ZCARD', dead),
  oldest_overdue_ms = oldest,
  paused = string.byte(flags, 1) == 1 and 1 or 0,
  waiting_on_limit = held,
  done = redis.call('ZCARD', done),
  awaiting = redis.call('ZCARD', waiting),
}
