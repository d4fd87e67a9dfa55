-- delayq script; constants from Rust written in (scripts.rs)
-- list.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local lease = KEYS[2]
local dead = KEYS[3]
local jobs = KEYS[4]
local done = KEYS[5]
local stat = KEYS[6]
local ready = KEYS[7]
local lane = KEYS[8]
local lanemeta = KEYS[9]
local kvt = KEYS[10]
local waiting = KEYS[11]
local which = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local after = (ARGV[4] == '1')
local after_score = tonumber(ARGV[5])
local after_id = ARGV[6]
local function push_listed(list, id, score, rec) list[#list + 1] = id list[#list + 1] = score list[#list + 1] = rec end
local function list_reply(t) return { t.jobs, t.cut } end
local rec_fixed, rec_extra, rec_kp, key_promote
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + clock_offset_us
end
local function now_ms()
  return math.floor(now_us() / 1000)
end
local function has(flags, f)
  return bit.band(flags, f) ~= 0
end
local function rec_due(rec)
  return (struct.unpack('>I6', rec, 7))
end
-- Full decode and encode, for the paths that change more than the header.
local function decode(s)
  local r = {}
  local version, flags, pos
  version, flags, r.attempt, r.max_attempts, r.due, r.created, r.token, pos =
    struct.unpack('>BBHHI6I6I6', s)
  if version ~= 1 then
    error('delayq: unknown record version ' .. tostring(version))
  end
  if has(flags, 1) then
    r.lease, pos = struct.unpack('>I4', s, pos)
  end
  if has(flags, 2) then
    r.bkind, r.bbase, r.bcap, pos = struct.unpack('>BI4I4', s, pos)
  end
  if has(flags, 8) then
    r.timeout, pos = struct.unpack('>I4', s, pos)
  end
  if has(flags, 16) then
    r.expires, pos = struct.unpack('>I6', s, pos)
    r.expires_rel = has(flags, 32)
  end
  if has(flags, 64) then
    local n
    n, pos = struct.unpack('>B', s, pos)
    for _ = 1, n do
      local tag
      tag, pos = struct.unpack('>B', s, pos)
      if tag == 1 then
        r.prio, pos = struct.unpack('>B', s, pos)
      elseif tag == 2 then
        r.keep, pos = struct.unpack('>I6', s, pos)
      elseif tag == 3 then
        r.dedupe, pos = struct.unpack('>I6', s, pos)
      elseif tag == 4 then
        local n
        n, pos = struct.unpack('>H', s, pos)
        r.target = string.sub(s, pos, pos + n - 1)
        pos = pos + n
      elseif tag >= 16 then
        -- 16, 17, or a later build's sized extra: kept as read, written back by
        -- encode.
        local n
        n, pos = struct.unpack('>H', s, pos)
        if tag == 16 then
          r.trace = string.sub(s, pos, pos + n - 1)
        elseif tag == 17 then
          r.result = string.sub(s, pos, pos + n - 1)
        else
          r.sized = r.sized or {}
          r.sized[#r.sized + 1] = string.sub(s, pos - 3, pos + n - 1)
        end
        pos = pos + n
      else
        error('delayq: unknown record extra ' .. tostring(tag))
      end
    end
  end
  if has(flags, 128) then
    r.done_at, r.dedupe_until, pos = struct.unpack('>I6I6', s, pos)
  end
  if has(flags, 4) then
    local n
    n, pos = struct.unpack('>H', s, pos)
    r.err = string.sub(s, pos, pos + n - 1)
    pos = pos + n
  end
  r.payload = string.sub(s, pos)
  return r
end
-- Runs `cmd key a1 a2 ...` over a flat list in chunks (Lua's unpack limit is ~8000 values).
local function call_chunked(cmd, key, list)
  local step = 2000
  for i = 1, #list, step do
    local j = math.min(i + step - 1, #list)
    redis.call(cmd, key, unpack(list, i, j))
  end
end
-- The priority in a raw record (5 without one).
local function rec_priority(raw)
  if has(string.byte(raw, 2), 64) then
    local p = decode(raw).prio
    if p then return p end
  end
  return 5
end
-- Moves up to `n` due jobs from `sched` to `ready`, scored by priority; returns how many.
local function promote(sched, ready, jobs, now, n)
  local ids = redis.call('ZRANGEBYSCORE', sched, '-inf', now, 'WITHSCORES', 'LIMIT', 0, n)
  if #ids == 0 then return 0 end
  local names = {}
  for i = 1, #ids, 2 do names[#names + 1] = ids[i] end
  local raws = redis.call('HMGET', jobs, unpack(names))
  local zadd = {}
  for i = 1, #names do
    local p = 5
    if raws[i] then p = rec_priority(raws[i]) end
    zadd[#zadd + 1] = tonumber(ids[2 * i]) - p * 60000
    zadd[#zadd + 1] = names[i]
  end
  call_chunked('ZADD', ready, zadd)
  call_chunked('ZREM', sched, names)
  return #names
end
-- The id and the record of a lane entry.
local function lane_entry(e)
  local n = string.byte(e, 1)
  return string.sub(e, 2, 1 + n), string.sub(e, 2 + n)
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
-- The lane's head sequence number.
local function lane_h(meta)
  return tonumber(redis.call('HGET', meta, 'h') or 0)
end
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
-- The key prefix of the lane's index buckets (`dq:{tag}:lane` -> `dq:{tag}:ix:`).
local function ix_prefix(lane)
  return string.sub(lane, 1, -5) .. 'ix:'
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
-- `k` entries of the window starting at `s` became tombstones (negative: tombstones left it
-- with the entries around them).
local function win_tombs(lane, s, k)
  redis.call('HINCRBY', wtombs_key(lane), win_member(s), k)
end
-- Adds id `id` of index bucket `b` to `gone` (bucket -> ids), for win_unindex.
local function win_gone(gone, b, id)
  local g = gone[b]
  if not g then
    g = {}
    gone[b] = g
  end
  g[#g + 1] = id
end
-- Deletes the index entries of the window jobs in `gone` (bucket -> ids): jobs that left
-- their window whole (moved or cancelled in bulk).
local function win_unindex(lane, gone)
  local ixp = ix_prefix(lane)
  for b, ids in pairs(gone) do call_chunked('HDEL', ixp .. b, ids) end
end
-- Moves the jobs of the windows that start within one width `W` of `now` to `jobs` and
-- `sched` (same records, same due times), the earliest window first and each from its tail
-- (the places of the entries left do not move), reading at most `n` entries; their index
-- entries go (each entry carries its bucket). Returns when the next window is due to move
-- (`now`: this call left some), or nil when there is none.
local function win_promote(lane, meta, jobs, sched, now, W, n)
  local wk = wins_key(lane)
  while true do
    local head = redis.call('ZRANGE', wk, 0, 0, 'WITHSCORES')
    if not head[1] then return nil end
    local start = tonumber(head[2])
    if start - W > now then return start - W end
    if n <= 0 then return now end
    local key = win_key(lane, start)
    local ents = redis.call('LRANGE', key, -n, -1)
    local hset, zadd, gone, moved = {}, {}, {}, 0
    for i = 1, #ents do
      if not lane_dead(ents[i]) then
        local id, b, rec = win_entry(ents[i])
        hset[#hset + 1] = id
        hset[#hset + 1] = rec
        zadd[#zadd + 1] = rec_due(rec)
        zadd[#zadd + 1] = id
        win_gone(gone, b, id)
        moved = moved + 1
      end
    end
    if moved > 0 then
      call_chunked('HSET', jobs, hset)
      call_chunked('ZADD', sched, zadd)
      win_unindex(lane, gone)
      redis.call('HINCRBY', meta, 'wn', -moved)
    end
    if #ents < n then
      -- The whole window moved.
      redis.call('DEL', key)
      redis.call('ZREM', wk, head[1])
      redis.call('HDEL', wtombs_key(lane), head[1])
    else
      redis.call('LTRIM', key, 0, -n - 1)
      if moved < #ents then win_tombs(lane, start, moved - #ents) end
    end
    n = n - #ents
  end
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
-- Drops the first `k` entries (head sequence `h`): claimed jobs and tombstones. Their bits in
-- `lanegone` stay, below the new head, until lane_mark cuts them off.
local function lane_trim(lane, meta, h, k)
  if k <= 0 then return end
  redis.call('LTRIM', lane, k, -1)
  redis.call('HSET', meta, 'h', h + k)
end
-- Moves up to `n` due live lane jobs to `jobs` and `sched` (a queue with priorities promotes
-- from there); returns how many it moved.
local function lane_spill(lane, meta, jobs, sched, now, n)
  local ents = redis.call('LRANGE', lane, 0, n - 1)
  if #ents == 0 or lane_due(ents[1]) > now then return 0 end
  local h = lane_h(meta)
  local k, moved = 0, 0
  for i = 1, #ents do
    if lane_due(ents[i]) > now then break end
    k = i
    if not lane_dead(ents[i]) then
      local id, rec = lane_entry(ents[i])
      redis.call('HSET', jobs, id, rec)
      redis.call('ZADD', sched, rec_due(rec), id)
      moved = moved + 1
    end
  end
  lane_trim(lane, meta, h, k)
  return moved
end

-- list.lua: one page of a shard's jobs in one state, by (score, id) (read only).
-- Keys (declared in transitions/list.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- dead      ZSET id -> failed_at ms
-- jobs      HASH id -> record
-- done      ZSET id -> when its retention ends (ms)
-- stat      STRING (the 8 flag)
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- kvt       HASH a keyed queue's turns (keyed.lua: key_promote; only with 32)
-- waiting   ZSET id -> due_ms: jobs waiting for their dependencies (6)
-- Arguments: which (1: due later than now | 2 | 3 | 4 |
-- 5: kept completed jobs | 6), n (page size), after (a cursor is given), after_score and
-- after_id (the cursor: the page starts strictly after (score, id), whether or not that job is
-- still there).
-- Scheduled and due jobs of a queue with a lane: the lane's and `sched`'s merged by (score,
-- id); the lane is in due order, so its part is read from the first entry due at the cursor's
-- score and ends after every entry tied with its (n + 1)-th. One call reads at most ~scan_max
-- lane entries (a cancel-heavy lane can hold millions of tombstones ahead of its jobs: read
-- whole, they would hold Redis for a second): past that, at the next due time d, it stops.
-- The lane's time windows (lane.lua: win_key) are read whole (each holds at most 8192
-- entries, in arrival order), in the order they start, from the one holding the cursor's score
-- (or now, for scheduled jobs), until they gave more than n jobs: windows do not overlap, so
-- a window's jobs come before every later one's. One call reads at most 256 windows, and
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
if which == 3 then z = lease elseif which == 4 then z = dead elseif which == 5 then z = done elseif which == 6 then z = waiting end
-- A queue with priorities: its due jobs are listed in claim order (ready), after moving the
-- due ones still in `sched` there (common.lua: promote; the listing's only write).
local fw = redis.call('GETRANGE', stat, 1, 2 + 1)
local fl = string.byte(fw) or 0
local keyed = bit.band(fl, 32) ~= 0
local by_prio = which == 2 and (keyed or bit.band(fl, 8) ~= 0)
if by_prio then
  local W = win_width(fw, 1)
  if W > 0 then win_promote(lane, lmeta, jobs, sched, now, W, 10000) end
  lane_spill(lane, lmeta, jobs, sched, now, 10000)
  if keyed then
-- Where the optional section after the timeout starts in a raw record of flags `flags` (the
-- expiry, else the extras): the lease, backoff and timeout sections skipped by their fixed
-- widths, without decoding them.
rec_fixed = function(flags)
  local pos = 24 + 1
  if has(flags, 1) then pos = pos + 4 end
  if has(flags, 2) then pos = pos + 9 end
  if has(flags, 8) then pos = pos + 4 end
  return pos
end
-- The first extra of the raw record `raw` tagged `want` (or `also`, when given): where its
-- value starts, its length and its tag; nil when there is none. Read without decoding the
-- rest: 1 holds one byte, 2 and 3 six, every other extra (4, the
-- sized ones) a u16 length, then its bytes.
rec_extra = function(raw, want, also)
  local flags = string.byte(raw, 2)
  if not has(flags, 64) then return nil end
  local pos = rec_fixed(flags)
  if has(flags, 16) then pos = pos + 6 end
  local n = string.byte(raw, pos)
  pos = pos + 1
  for _ = 1, n do
    local tag = string.byte(raw, pos)
    local len, at = 1, pos + 1
    if tag == 2 or tag == 3 then
      len = 6
    elseif tag ~= 1 then
      len, at = struct.unpack('>H', raw, pos + 1), pos + 3
    end
    if tag == want or tag == also then return at, len, tag end
    pos = at + len
  end
  return nil
end
-- The key ('' for a job without one) and priority of the raw record `raw`, read from its
-- extras without decoding the rest. Both writers (encode, record.rs) put 1 first, so
-- a key found first means no priority.
rec_kp = function(raw)
  local key, prio = '', 5
  local at, len, tag = rec_extra(raw, 18, 1)
  if tag == 1 then
    prio = string.byte(raw, at)
    at, len = rec_extra(raw, 18)
  end
  if at then key = string.sub(raw, at, at + len - 1) end
  return key, prio
end
-- Moves up to `n` due jobs from `sched` to `ready`, each at its key's next turn (see the top
-- of this file); returns how many.
key_promote = function(sched, ready, jobs, kvt, now, n)
  local ids = redis.call('ZRANGEBYSCORE', sched, '-inf', now, 'LIMIT', 0, n)
  if #ids == 0 then return 0 end
  local raws = redis.call('HMGET', jobs, unpack(ids))
  local ks, ps, names, seen = {}, {}, { '\0V' }, {}
  for i = 1, #ids do
    local k, p = '', 5
    if raws[i] then k, p = rec_kp(raws[i]) end
    ks[i], ps[i] = k, p
    if not seen[k] then
      seen[k] = true
      names[#names + 1] = k
    end
  end
  local vals = redis.call('HMGET', kvt, unpack(names))
  local V = tonumber(vals[1]) or 0
  local turn = {}
  for j = 2, #names do turn[names[j]] = math.max(tonumber(vals[j]) or 0, V) end
  local zadd = {}
  for i = 1, #ids do
    local t = turn[ks[i]] + 1
    turn[ks[i]] = t
    zadd[#zadd + 1] = t - ps[i] * 1099511627776
    zadd[#zadd + 1] = ids[i]
  end
  local hset = {}
  for j = 2, #names do
    hset[#hset + 1] = names[j]
    hset[#hset + 1] = turn[names[j]]
  end
  call_chunked('ZADD', ready, zadd)
  call_chunked('ZREM', sched, ids)
  call_chunked('HSET', kvt, hset)
  return #ids
end
    -- In turns, as a claim takes them (keyed.lua; a parked job after every live one).
    key_promote(sched, ready, jobs, kvt, now, 10000)
  else
    promote(sched, ready, jobs, now, 10000)
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
if which == 1 then start = redis.call('ZCOUNT', sched, '-inf', now) end
if after then
  local r = rank_after(after_score, after_id)
  if r > start then start = r end
end
local page = redis.call('ZRANGE', z, start, start + n, 'WITHSCORES')
local ids, scores = {}, {}
for i = 1, #page, 2 do
  local score = tonumber(page[i + 1])
  if which == 2 and not by_prio and score > now then break end
  ids[#ids + 1] = page[i]
  scores[#scores + 1] = score
end
local items = {}
if #ids > 0 then
  local raws = redis.call('HMGET', jobs, unpack(ids))
  for i = 1, #ids do
    -- (A done-index entry whose id was enqueued again is not a done job.)
    if raws[i] and (which ~= 5 or has(string.byte(raws[i], 2), 128)) then
      items[#items + 1] = { ids[i], scores[i], raws[i] }
    end
  end
end
-- Scheduled or due jobs outside `ready`: the lane's and its windows' too, after the cursor
-- (cs, cid); at most scan_max of their entries read a call.
local unclaimed = which == 1 or (which == 2 and not by_prio)
local cs, cid = nil, after_id
if after then cs = after_score end
local scan_max = 8192
local len = 0
-- Where a call that read enough lane entries stopped (nil: it did not).
local cut = nil
if unclaimed then len = redis.call('LLEN', lane) end
if len > 0 then
  local pos = 0
  if which == 1 then pos = lane_pos(lane, len, now) end
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
      if (which == 2 and d > now) or (taken > n and d > last) then
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
if unclaimed then W = win_width(fw, 1) end
if W > 0 then
  local from = cs
  if which == 1 and (not from or from < now) then from = now end
  local lo, hi = '-inf', '+inf'
  if from then lo = from - from % W end
  if which == 2 then hi = now end
  local starts = redis.call('ZRANGEBYSCORE', wins_key(lane), lo, hi, 'LIMIT', 0, 256 + 1)
  local got, read = 0, 0
  for i, m in ipairs(starts) do
    if got > n then break end
    if i > 256 or read >= scan_max then
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
        if ((which == 2) == (d <= now))
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
