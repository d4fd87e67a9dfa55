-- delayq script; constants from Rust written in (scripts.rs)
-- cancel_all.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local jobs = KEYS[2]
local ready = KEYS[3]
local lane = KEYS[4]
local lanemeta = KEYS[5]
local lanegone = KEYS[6]
local stat = KEYS[7]
local bm = KEYS[8]
local due_ones = (ARGV[2] == '1')
local most = tonumber(ARGV[3])
local has, rec_fixed, rec_extra, rec_batch, batch_end, batch_count
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
-- Runs `cmd key a1 a2 ...` over a flat list in chunks (Lua's unpack limit is ~8000 values).
local function call_chunked(cmd, key, list)
  local step = 2000
  for i = 1, #list, step do
    local j = math.min(i + step - 1, #list)
    redis.call(cmd, key, unpack(list, i, j))
  end
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
-- Clears the tombstone bits from sequence number `from` on (base `b`): the places a cut off
-- tail leaves, which the next jobs pushed take again.
local function lane_unmark_from(gone, b, from)
  local off = from - b
  local whole, bits = math.floor(off / 8), off % 8
  local keep = redis.call('GETRANGE', gone, 0, whole)
  -- (A bitmap that ends before `from` has no bit there: nothing to write.)
  if #keep <= whole then return end
  local out = string.sub(keep, 1, whole)
  if bits > 0 then
    local mask = bit.band(bit.lshift(0xFF, 8 - bits), 0xFF)
    out = out .. string.char(bit.band(string.byte(keep, whole + 1), mask))
  end
  if out == '' then redis.call('DEL', gone) else redis.call('SET', gone, out) end
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

-- cancel_all.lua: cancels waiting jobs of one kind, a bounded number per call.
-- Keys (declared in transitions/cancel_all.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- jobs      HASH id -> record
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- stat      STRING (the width of the lane's time windows at 2, the flags)
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard (batch.lua; only with
--           128): a job that ends is counted there
-- Arguments: due_ones (true: due jobs, due <= now; false: scheduled jobs, due later than
-- now), most (jobs in this call).
-- Returns the number cancelled (fewer than `most`: none of that kind is left). The lane's
-- jobs of that kind go first: the due ones are its first entries, the later ones its last,
-- so they are cut off (LTRIM); their index entries are left behind (lane.lua: lane_find
-- never trusts one whose entry is gone). Then the time windows' (lane.lua: win_key): a
-- window wholly of that kind goes whole, its jobs' index entries with it; one across now
-- loses its jobs of that kind entry by entry (tombstones). A call finishes the window it
-- began, so it may cancel up to 8192 more than `most`.
-- Safe to run twice: a second run cancels only jobs of that kind that exist then (the caller
-- asked for all of them to go).
local lmeta, lgone = lanemeta, lanegone
local now = now_ms()
local lflags = string.byte(redis.call('GETRANGE', stat, 1, 1)) or 0
local batched = bit.band(lflags, 128) ~= 0
if batched then
has = function(flags, f)
  return bit.band(flags, f) ~= 0
end
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
-- The batch of the raw record `raw` ('' for none), read from its extras without decoding
-- the rest.
rec_batch = function(raw)
  local at, len = rec_extra(raw, 19)
  if not at then return '' end
  return string.sub(raw, at, at + len - 1)
end
-- Job `id` (its record `raw`, as it was before it ended) ended as `how` — 'o' acked, 'd'
-- dead, 'c' cancelled — with `result` (an ack's, or nil): noted in `acc` (batch -> its ends in
-- this call), counted by batch_count at the end of the script.
batch_end = function(acc, raw, id, how, result)
  local b = rec_batch(raw)
  if b == '' then return end
  local a = acc[b]
  if not a then
    a = { ids = {}, hows = {}, results = {} }
    acc[b] = a
  end
  local n = #a.ids + 1
  a.ids[n] = id
  a.hows[n] = how
  a.results[n] = result or false
end
-- Counts the ends noted in `acc` (batch_end) in their batches' `bm:<batch>` hashes of a queue
-- of prefix `bm`, a batch at a time (one read, one write and the counts, whatever the number
-- of its jobs): only a job still pending changes, so each job is counted once. When the
-- batch keeps results, an acked job's result goes to `bmr:<batch>` (HASH id -> result) while
-- the shard's kept results stay within what a callback carries (1000 results,
-- 1048576 bytes: `\0rn`, `\0rb` in `bm:<batch>`); past that it is only counted
-- (`\0rl`, left out), so a batch costs what its callback carries. A batch left with no
-- pending job in this shard is marked in `bm!` (ZSET batch -> `now`), where the sweeps look
-- first (batch_ready.lua).
batch_count = function(bm, acc, now)
  for b, a in pairs(acc) do
    local k = bm .. ':' .. b
    local kr = redis.call('HMGET', k, '\0R', '\0rn', '\0rb')
    local keep, kn, kb, left = kr[1], tonumber(kr[2] or 0), tonumber(kr[3] or 0), 0
    local set, kept, n, total = {}, {}, { o = 0, d = 0, c = 0 }, 0
    for i = 1, #a.ids, 1000 do
      local st = redis.call('HMGET', k, unpack(a.ids, i, math.min(i + 999, #a.ids)))
      for j = 1, #st do
        local x = i + j - 1
        if st[j] == 'p' then
          local id, how, r = a.ids[x], a.hows[x], a.results[x]
          set[#set + 1] = id
          set[#set + 1] = how
          n[how] = n[how] + 1
          total = total + 1
          if keep and r and r ~= '' then
            if kn < 1000 and kb + #r <= 1048576 then
              kn, kb = kn + 1, kb + #r
              kept[#kept + 1] = id
              kept[#kept + 1] = r
            else
              left = left + 1
            end
          end
        end
      end
    end
    if total > 0 then
      call_chunked('HSET', k, set)
      for how, c in pairs(n) do
        if c > 0 then redis.call('HINCRBY', k, '\0' .. how, c) end
      end
      if #kept > 0 then
        call_chunked('HSET', bm .. 'r:' .. b, kept)
        redis.call('HSET', k, '\0rn', kn, '\0rb', kb)
      end
      if left > 0 then redis.call('HINCRBY', k, '\0rl', left) end
      if redis.call('HINCRBY', k, '\0p', -total) <= 0 then
        redis.call('ZADD', bm .. '!', now, b)
      end
    end
  end
end
end
-- The jobs of `list` about to go, each counted in its batch (a queue with batches only).
local function cancelling(list)
  if not batched then return end
  local bacc = {}
  for i = 1, #list, 1000 do
    local raws = redis.call('HMGET', jobs, unpack(list, i, math.min(i + 999, #list)))
    for j = 1, #raws do
      if raws[j] then batch_end(bacc, raws[j], list[i + j - 1], 'c') end
    end
  end
  batch_count(bm, bacc, now)
end
local from_lane = 0
local len = redis.call('LLEN', lane)
if len > 0 then
  local h, b = lane_hb(lmeta)
  local p = lane_pos(lane, len, now)
  -- The live jobs among the first (the last) k entries, and the smallest k that holds `most`
  -- of them within the due (the later) entries, by binary search on the tombstone counts.
  local function live_of(k)
    if due_ones then return k - lane_tombs(lgone, b, h, h + k - 1) end
    return k - lane_tombs(lgone, b, h + len - k, h + len - 1)
  end
  local span = p
  if not due_ones then span = len - p end
  local k = span
  local live = live_of(span)
  if live > most then
    local lo, hi = 0, span
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if live_of(mid) >= most then hi = mid else lo = mid + 1 end
    end
    k, live = lo, most
  end
  if due_ones then
    lane_trim(lane, lmeta, h, k)
  else
    if k > 0 then
      if k == len then
        redis.call('DEL', lane)
      else
        redis.call('LTRIM', lane, 0, len - k - 1)
      end
      lane_unmark_from(lgone, b, h + len - k)
      local last = redis.call('LINDEX', lane, -1)
      if last then redis.call('HSET', lmeta, 't', lane_due(last)) end
    end
  end
  from_lane = live
  most = most - live
  if most == 0 then return from_lane end
end
local W = win_width(redis.call('GETRANGE', stat, 1, 2 + 1), 1)
if W > 0 then
  local wk, tombs = wins_key(lane), wtombs_key(lane)
  local lo, hi = '-inf', now
  if not due_ones then lo, hi = now - now % W, '+inf' end
  -- The windows of that kind, 64 at a time (those left after a pass: across now, or holding
  -- only the other kind's jobs or tombstones, are passed by the next one's `lo`).
  while most > 0 do
    local starts = redis.call('ZRANGEBYSCORE', wk, lo, hi, 'LIMIT', 0, 64)
    for _, m in ipairs(starts) do
      if most <= 0 then break end
      local start = tonumber(m)
      -- Wholly of that kind: due (its last ms is past), or scheduled (it starts after now).
      local whole = (due_ones and start + W - 1 <= now) or (not due_ones and start > now)
      local key = win_key(lane, m)
      local ents = redis.call('LRANGE', key, 0, -1)
      local gone, k = {}, 0
      for pos = 1, #ents do
        local e = ents[pos]
        if not lane_dead(e) then
          local id, b, rec = win_entry(e)
          if whole or (due_ones == (rec_due(rec) <= now)) then
            win_gone(gone, b, id)
            if not whole then redis.call('LSET', key, pos - 1, '\0') end
            k = k + 1
          end
        end
      end
      win_unindex(lane, gone)
      if whole then
        redis.call('DEL', key)
        redis.call('ZREM', wk, m)
        redis.call('HDEL', tombs, m)
      elseif k > 0 then
        win_tombs(lane, start, k)
      end
      if k > 0 then redis.call('HINCRBY', lmeta, 'wn', -k) end
      from_lane = from_lane + k
      most = most - k
      lo = '(' .. m
    end
    if #starts < 64 then break end
  end
  if most <= 0 then return from_lane end
end
local ids
if due_ones then
  -- Due jobs of a queue with priorities wait in `ready` (all of them due).
  ids = redis.call('ZRANGE', ready, 0, most - 1)
  if #ids > 0 then
    cancelling(ids)
    call_chunked('HDEL', jobs, ids)
    call_chunked('ZREM', ready, ids)
    return from_lane + #ids
  end
  ids = redis.call('ZRANGEBYSCORE', sched, '-inf', now, 'LIMIT', 0, most)
else
  ids = redis.call('ZRANGEBYSCORE', sched, '(' .. now, '+inf', 'LIMIT', 0, most)
end
if #ids == 0 then return from_lane end
cancelling(ids)
call_chunked('HDEL', jobs, ids)
call_chunked('ZREM', sched, ids)
return from_lane + #ids
