-- delayq script; constants from Rust written in (scripts.rs)
-- stats.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local lease = KEYS[2]
local dead = KEYS[3]
local stat = KEYS[4]
local done = KEYS[5]
local ready = KEYS[6]
local jobs = KEYS[7]
local lane = KEYS[8]
local lanemeta = KEYS[9]
local lanegone = KEYS[10]
local waiting = KEYS[11]
local function shard_stats(t) return { t.scheduled, t.due, t.due_next_minute, t.leased, t.dead, t.oldest_overdue_ms, t.paused, t.waiting_on_limit, t.done, t.awaiting } end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + clock_offset_us
end
local function now_ms()
  return math.floor(now_us() / 1000)
end
local function rec_due(rec)
  return (struct.unpack('>I6', rec, 7))
end
-- The shard's limits with the bucket refilled to `now` (µs). A clock stepping back adds
-- nothing.
local function limits_read(stat, now)
  local raw = redis.call('GETRANGE', stat, 30408, 30408 + 32 - 1)
  local l = {}
  l.per_s, l.burst, l.mif, l.tokens, l.at = struct.unpack('>dI4I4dd', raw)
  if l.per_s > 0 and now > l.at then
    l.tokens = math.min(l.burst, l.tokens + (now - l.at) * l.per_s / 1000000)
  end
  return l
end
-- Whether a lane entry is a cancelled job's tombstone.
local function lane_dead(e)
  return string.byte(e, 1) == 0
end
-- The due time of a lane entry (or a tombstone), without copying its record.
local function lane_due(e)
  local n = string.byte(e, 1)
  if n == 0 then return (struct.unpack('>I6', e, 2)) end
  return (struct.unpack('>I6', e, 2 + n + 7 - 1))
end
-- The lane's head sequence number and the sequence number of bit 0 of `lanegone`.
local function lane_hb(meta)
  local v = redis.call('HMGET', meta, 'h', 'b')
  return tonumber(v[1] or 0), tonumber(v[2] or 0)
end
-- How many of the lane's entries with sequence numbers `from` .. `to` are tombstones (`b`:
-- lane_hb's).
local function lane_tombs(gone, b, from, to)
  if to < from then return 0 end
  return redis.call('BITCOUNT', gone, from - b, to - b, 'BIT')
end

-- Time windows, the lane's second part (delayq::QueueSettings::lane_window_ms): on a lane
-- queue with a window width W (ms: the u16 at 2 of `stat`, 0: none), a new job that
-- does not fit the one-delay lane and whose window — it starts at s = due - due % W — starts
-- more than one width from now (s > now + W) is kept whole in that window's LIST
-- `<lane>:<s>`, in arrival order, each entry a length byte, the id, its index bucket (u16)
-- and the record (win_entry); a cancelled entry becomes the tombstone '\0'. Its index entry
-- (the lane's buckets) holds the start and the place, tagged 'W' (a lane entry's is its
-- sequence number, tagged 'L': ix_entry). The ZSET `<lane>:w` holds each
-- window's start (score and member), the HASH `<lane>:t` the tombstones of each that has
-- any (field: the start; written by a cancel, not by an enqueue: a window's live jobs are its
-- length less those), `lanemeta`'s field `wn` the live jobs of all. A window holds at most
-- 8192 entries (jobs past that use the sorted sets). One width before it starts, a window
-- moves to `jobs` and `sched` (win_promote: claims, a bounded part a call), so a job is
-- claimed, and changed by every path but the look-up, cancel and listing, in the sorted-set
-- layout. The key names (win_key, wins_key, wtombs_key, ix_prefix) are checked against
-- keys.rs by a test.
-- A window's start as its member of `<lane>:w`, its field of `<lane>:t` and its key's suffix
-- (`s`: a number or the member string).
local function win_member(s)
  return string.format('%.0f', s)
end
-- The LIST of the window that starts at `s`.
local function win_key(lane, s)
  return lane .. ':' .. win_member(s)
end
-- The ZSET of the windows' starts.
local function wins_key(lane)
  return lane .. ':w'
end
-- The HASH start -> tombstones of each window that has any.
local function wtombs_key(lane)
  return lane .. ':t'
end
-- The window width from `raw` (bytes of `stat` read from offset `from` to 2 + 1 at
-- least): 0 when the queue has none (or the string is shorter: never set).
local function win_width(raw, from)
  local at = 2 - from + 1
  if #raw < at + 1 then return 0 end
  return (struct.unpack('>H', raw, at))
end
-- The id, index bucket and record of a window's entry.
local function win_entry(e)
  local n = string.byte(e, 1)
  return string.sub(e, 2, 1 + n), (struct.unpack('>H', e, 2 + n)), string.sub(e, 4 + n)
end
-- The first position of the lane (of `len` entries) whose due time is later than `t`
-- (binary search: `len` when none is).
local function lane_pos(lane, len, t)
  local lo, hi = 0, len
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if lane_due(redis.call('LINDEX', lane, mid)) <= t then lo = mid + 1 else hi = mid end
  end
  return lo
end

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
local flags = redis.call('GETRANGE', stat, 0, 2 + 1)
local W = win_width(flags, 0)
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
if bit.band(string.byte(flags, 2) or 0, 1) ~= 0 then
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
