-- list.lua: one page of a shard's jobs in one state, by (score, id) (read only).
-- Keys (declared in transitions/list.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- dead      ZSET id -> failed_at ms
-- jobs      HASH id -> record
-- done      ZSET id -> when its retention ends (ms)
-- stat      STRING (the L_PRIO flag)
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- kvt       HASH a keyed queue's turns (keyed.lua: key_promote; only with L_KEYS)
-- waiting   ZSET id -> due_ms: jobs waiting for their dependencies (LIST_WAITING)
-- Arguments: which (LIST_SCHEDULED: due later than now | LIST_DUE | LIST_LEASED | LIST_DEAD |
-- LIST_DONE: kept completed jobs | LIST_WAITING), n (page size), after (a cursor is given), after_score and
-- after_id (the cursor: the page starts strictly after (score, id), whether or not that job is
-- still there).
-- Scheduled and due jobs of a queue with a lane: the lane's and `sched`'s merged by (score,
-- id); the lane is in due order, so its part is read from the first entry due at the cursor's
-- score and ends after every entry tied with its (n + 1)-th. One call reads at most ~scan_max
-- lane entries (a cancel-heavy lane can hold millions of tombstones ahead of its jobs: read
-- whole, they would hold Redis for a second): past that, at the next due time d, it stops.
-- The lane's time windows (lane.lua: win_key) are read whole (each holds at most WIN_MAX
-- entries, in arrival order), in the order they start, from the one holding the cursor's score
-- (or now, for scheduled jobs), until they gave more than n jobs: windows do not overlap, so
-- a window's jobs come before every later one's. One call reads at most WIN_LIST windows, and
-- no window once scan_max entries were read: it stops at the next window's start d.
-- Returns list_reply{ jobs, cut }: jobs (push_listed: id, score, record) — at most n + 1 (one
-- more than the page tells the caller that a next page exists); cut: -1, or, when the call
-- stopped early, d: then the jobs are only those scored before d, and the caller asks again
-- from (d, '').
-- Safe to run twice: it writes nothing but the promotion of due jobs of a queue with
-- priorities (and of time windows a claim would move: their jobs then in `sched`), which a
-- second run finds done.
local lmeta = lanemeta
local now = now_ms()
local z = sched
if which == LIST_LEASED then z = lease elseif which == LIST_DEAD then z = dead elseif which == LIST_DONE then z = done elseif which == LIST_WAITING then z = waiting end
-- A queue with priorities: its due jobs are listed in claim order (ready), after moving the
-- due ones still in `sched` there (common.lua: promote; the listing's only write).
local fw = redis.call('GETRANGE', stat, S_FLAGS, S_WIDTH + 1)
local fl = string.byte(fw) or 0
local keyed = bit.band(fl, L_KEYS) ~= 0
local by_prio = which == LIST_DUE and (keyed or bit.band(fl, L_PRIO) ~= 0)
if by_prio then
  local W = win_width(fw, S_FLAGS)
  if W > 0 then win_promote(lane, lmeta, jobs, sched, now, W, LIST_PROMOTE) end
  lane_spill(lane, lmeta, jobs, sched, now, LIST_PROMOTE)
  if keyed then
    --@ define key_promote
    -- In turns, as a claim takes them (keyed.lua; a parked job after every live one).
    key_promote(sched, ready, jobs, kvt, now, LIST_PROMOTE)
  else
    promote(sched, ready, jobs, now, LIST_PROMOTE)
  end
  z = ready
end

-- Byte order (what a sorted set uses for equal scores; Lua's `<` follows the locale).
local function bytes_le(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end

-- Rank of the first member after (s, id): the cursor's own rank + 1 while it is there, else
-- a binary search among the members scored s (ZRANGE by rank, log2 of the ties).
local function rank_after(s, id)
  local sc = redis.call('ZSCORE', z, id)
  if sc and tonumber(sc) == s then return redis.call('ZRANK', z, id) + 1 end
  local lo = redis.call('ZCOUNT', z, '-inf', '(' .. s)
  local hi = lo + redis.call('ZCOUNT', z, s, s)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if bytes_le(redis.call('ZRANGE', z, mid, mid)[1], id) then lo = mid + 1 else hi = mid end
  end
  return lo
end

local start = 0
if which == LIST_SCHEDULED then start = redis.call('ZCOUNT', sched, '-inf', now) end
if after then
  local r = rank_after(after_score, after_id)
  if r > start then start = r end
end
local page = redis.call('ZRANGE', z, start, start + n, 'WITHSCORES')
local ids, scores = {}, {}
for i = 1, #page, 2 do
  local score = tonumber(page[i + 1])
  if which == LIST_DUE and not by_prio and score > now then break end
  ids[#ids + 1] = page[i]
  scores[#scores + 1] = score
end
local items = {}
if #ids > 0 then
  local raws = redis.call('HMGET', jobs, unpack(ids))
  for i = 1, #ids do
    -- (A done-index entry whose id was enqueued again is not a done job.)
    if raws[i] and (which ~= LIST_DONE or has(string.byte(raws[i], 2), F_DONE)) then
      items[#items + 1] = { ids[i], scores[i], raws[i] }
    end
  end
end
-- Scheduled or due jobs outside `ready`: the lane's and its windows' too, after the cursor
-- (cs, cid); at most scan_max of their entries read a call.
local unclaimed = which == LIST_SCHEDULED or (which == LIST_DUE and not by_prio)
local cs, cid = nil, after_id
if after then cs = after_score end
local scan_max = 8192
local len = 0
-- Where a call that read enough lane entries stopped (nil: it did not).
local cut = nil
if unclaimed then len = redis.call('LLEN', lane) end
if len > 0 then
  local pos = 0
  if which == LIST_SCHEDULED then pos = lane_pos(lane, len, now) end
  if cs then pos = math.max(pos, lane_pos(lane, len, cs - 1)) end
  -- (Each read twice the last, up to 4,096 entries: runs of tombstones pass quickly.)
  local taken, last, step = 0, nil, n
  local read, prev = 0, nil
  while pos < len do
    local chunk = redis.call('LRANGE', lane, pos, pos + step)
    step = math.min(2 * step + 1, 4096)
    local stop = false
    for j = 1, #chunk do
      local d = lane_due(chunk[j])
      if (which == LIST_DUE and d > now) or (taken > n and d > last) then
        stop = true
        break
      end
      -- Read enough: stop where the due time moves on (a tie group is never split).
      if read >= scan_max and d > prev then
        cut = d
        stop = true
        break
      end
      read, prev = read + 1, d
      if not lane_dead(chunk[j]) then
        local id, rec = lane_entry(chunk[j])
        if not cs or d > cs or (d == cs and not bytes_le(id, cid)) then
          items[#items + 1] = { id, d, rec }
          taken, last = taken + 1, d
        end
      end
    end
    if stop or #chunk == 0 then break end
    pos = pos + #chunk
  end
end
local function before(a, b)
  if a[2] ~= b[2] then return a[2] < b[2] end
  return a[1] ~= b[1] and bytes_le(a[1], b[1])
end
local W = 0
if unclaimed then W = win_width(fw, S_FLAGS) end
if W > 0 then
  local from = cs
  if which == LIST_SCHEDULED and (not from or from < now) then from = now end
  local lo, hi = '-inf', '+inf'
  if from then lo = from - from % W end
  if which == LIST_DUE then hi = now end
  local starts = redis.call('ZRANGEBYSCORE', wins_key(lane), lo, hi, 'LIMIT', 0, WIN_LIST + 1)
  local got, read = 0, 0
  for i, m in ipairs(starts) do
    if got > n then break end
    if i > WIN_LIST or read >= scan_max then
      local s = tonumber(m)
      if not cut or s < cut then cut = s end
      break
    end
    local ents = redis.call('LRANGE', win_key(lane, m), 0, -1)
    read = read + #ents
    local mine = {}
    for _, e in ipairs(ents) do
      if not lane_dead(e) then
        local id, _, rec = win_entry(e)
        local d = rec_due(rec)
        if ((which == LIST_DUE) == (d <= now))
          and (not cs or d > cs or (d == cs and not bytes_le(id, cid))) then
          mine[#mine + 1] = { id, d, rec }
        end
      end
    end
    -- (Past its first n + 1, no job of a window can be on the page.)
    table.sort(mine, before)
    for j = 1, math.min(#mine, n + 1) do items[#items + 1] = mine[j] end
    got = got + #mine
  end
end
table.sort(items, before)
local out = {}
local k = 0
for i = 1, math.min(#items, n + 1) do
  -- Stopped early: only what is known to come before every entry not read.
  if cut and items[i][2] >= cut then break end
  push_listed(out, items[i][1], items[i][2], items[i][3])
  k = k + 1
end
if not (cut and k <= n) then cut = -1 end
return list_reply{ jobs = out, cut = cut }
