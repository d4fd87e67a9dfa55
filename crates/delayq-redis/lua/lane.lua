-- lane.lua: the lane's helpers, prepended to the scripts after common.lua (not a script on
-- its own; scripts.rs carries only the helpers a script calls): the one-delay lane, its time
-- windows, and the paths that look a job up by id in the sorted sets and then the lane
-- (leased_raw, state_of, ack_pairs). Constants in CAPITALS as in common.lua.

-- The one-delay lane (delayq::QueueSettings::lane; the L_LANE flag of the byte at S_FLAGS):
-- jobs whose due times come in arrival order — every job of a queue with one delay — are kept
-- whole in a LIST `lane`, oldest first, each entry the id (a length byte, then its bytes) and
-- the record; the list's first entry has sequence number `h` of the HASH `lanemeta` (field
-- `t`: the due time of the last entry pushed), entry i has h + i. The lane's own index finds a
-- job by id: 1,024 small HASHes `ix:<bucket>` of id -> index entry (ix_entry; the bucket computed
-- by the client, keys.rs `bucket_of`; ~100 ids each at 100,000 jobs, so they stay listpacks
-- under the server's default `hash-max-listpack-*`). An index entry is trusted only when its
-- sequence number is in the lane and that entry carries the same id, so entries left behind
-- (claimed jobs until the claim's sweep passes their bucket, entries cancelled in bulk) are
-- never wrong, only garbage. A cancelled entry stays in the list as a tombstone (a zero
-- length byte and its due time, so the list keeps its due order: lane_tomb) until a claim
-- passes it; readers tell it by its first byte. Only the counts need to know where the
-- tombstones are without reading the entries: the bitmap STRING `lanegone` has bit s - b set
-- for each (b: field `b` of `lanemeta`, moved up past the bits of entries long gone when a
-- cancel finds them 4 KiB worth: lane_mark). Everything that finds a job by id in order to
-- change it moves it to the sorted-set layout first (lane_pull), so those paths stay as they
-- are.

--@ lane_entry
-- The id and the record of a lane entry.
local function lane_entry(e)
  local n = string.byte(e, 1)
  return string.sub(e, 2, 1 + n), string.sub(e, 2 + n)
end

--@ lane_dead
-- Whether a lane entry is a cancelled job's tombstone.
local function lane_dead(e)
  return string.byte(e, 1) == 0
end

--@ lane_due
-- The due time of a lane entry (or a tombstone), without copying its record.
local function lane_due(e)
  local n = string.byte(e, 1)
  if n == 0 then return (struct.unpack('>I6', e, 2)) end
  return (struct.unpack('>I6', e, 2 + n + AT_DUE - 1))
end

--@ lane_tomb
-- What a cancelled entry keeps of its job: its due time (7 bytes instead of the whole job; no
-- id has length 0, so lane_find never takes it for a job).
local function lane_tomb(due)
  return '\0' .. struct.pack('>I6', due)
end

--@ lane_h
-- The lane's head sequence number.
local function lane_h(meta)
  return tonumber(redis.call('HGET', meta, 'h') or 0)
end

--@ lane_hb
-- The lane's head sequence number and the sequence number of bit 0 of `lanegone`.
local function lane_hb(meta)
  local v = redis.call('HMGET', meta, 'h', 'b')
  return tonumber(v[1] or 0), tonumber(v[2] or 0)
end

--@ lane_tombs
-- How many of the lane's entries with sequence numbers `from` .. `to` are tombstones (`b`:
-- lane_hb's).
local function lane_tombs(gone, b, from, to)
  if to < from then return 0 end
  return redis.call('BITCOUNT', gone, from - b, to - b, 'BIT')
end

-- Time windows, the lane's second part (delayq::QueueSettings::lane_window_ms): on a lane
-- queue with a window width W (ms: the u16 at S_WIDTH of `stat`, 0: none), a new job that
-- does not fit the one-delay lane and whose window — it starts at s = due - due % W — starts
-- more than one width from now (s > now + W) is kept whole in that window's LIST
-- `<lane>:<s>`, in arrival order, each entry a length byte, the id, its index bucket (u16)
-- and the record (win_entry); a cancelled entry becomes the tombstone '\0'. Its index entry
-- (the lane's buckets) holds the start and the place, tagged IX_WINDOW (a lane entry's is its
-- sequence number, tagged IX_LANE: ix_entry). The ZSET `<lane>:w` holds each
-- window's start (score and member), the HASH `<lane>:t` the tombstones of each that has
-- any (field: the start; written by a cancel, not by an enqueue: a window's live jobs are its
-- length less those), `lanemeta`'s field `wn` the live jobs of all. A window holds at most
-- WIN_MAX entries (jobs past that use the sorted sets). One width before it starts, a window
-- moves to `jobs` and `sched` (win_promote: claims, a bounded part a call), so a job is
-- claimed, and changed by every path but the look-up, cancel and listing, in the sorted-set
-- layout. The key names (win_key, wins_key, wtombs_key, ix_prefix) are checked against
-- keys.rs by a test.

--@ win_member
-- A window's start as its member of `<lane>:w`, its field of `<lane>:t` and its key's suffix
-- (`s`: a number or the member string).
local function win_member(s)
  return string.format('%.0f', s)
end

--@ win_key needs win_member
-- The LIST of the window that starts at `s`.
local function win_key(lane, s)
  return lane .. ':' .. win_member(s)
end

--@ wins_key
-- The ZSET of the windows' starts.
local function wins_key(lane)
  return lane .. ':w'
end

--@ wtombs_key
-- The HASH start -> tombstones of each window that has any.
local function wtombs_key(lane)
  return lane .. ':t'
end

--@ ix_prefix
-- The key prefix of the lane's index buckets (`dq:{tag}:lane` -> `dq:{tag}:ix:`).
local function ix_prefix(lane)
  return string.sub(lane, 1, -5) .. 'ix:'
end

--@ ix_entry
-- What an index entry `v` points at, tagged by its first byte (keys.rs `IndexEntry` writes
-- the same): IX_LANE and the one-delay lane's sequence number, or IX_WINDOW and the window's
-- start and place. An entry written before the tags (a decimal number, or the 9 bytes of start
-- and place, whose first byte is below '0') reads as the same kind.
-- Returns kind, a, b: IX_LANE, sequence number, nil | IX_WINDOW, start, place.
local function ix_entry(v)
  local tag = string.sub(v, 1, 1)
  if tag == IX_LANE then return IX_LANE, tonumber(string.sub(v, 2)), nil end
  if tag == IX_WINDOW then
    local start, pos = struct.unpack('>I6I3', v, 2)
    return IX_WINDOW, start, pos
  end
  if string.byte(v, 1) >= 48 then return IX_LANE, tonumber(v), nil end
  local start, pos = struct.unpack('>I6I3', v)
  return IX_WINDOW, start, pos
end

--@ win_width
-- The window width from `raw` (bytes of `stat` read from offset `from` to S_WIDTH + 1 at
-- least): 0 when the queue has none (or the string is shorter: never set).
local function win_width(raw, from)
  local at = S_WIDTH - from + 1
  if #raw < at + 1 then return 0 end
  return (struct.unpack('>H', raw, at))
end

--@ win_entry
-- The id, index bucket and record of a window's entry.
local function win_entry(e)
  local n = string.byte(e, 1)
  return string.sub(e, 2, 1 + n), (struct.unpack('>H', e, 2 + n)), string.sub(e, 4 + n)
end

--@ win_tombs needs win_member wtombs_key
-- `k` entries of the window starting at `s` became tombstones (negative: tombstones left it
-- with the entries around them).
local function win_tombs(lane, s, k)
  redis.call('HINCRBY', wtombs_key(lane), win_member(s), k)
end

--@ win_gone
-- Adds id `id` of index bucket `b` to `gone` (bucket -> ids), for win_unindex.
local function win_gone(gone, b, id)
  local g = gone[b]
  if not g then
    g = {}
    gone[b] = g
  end
  g[#g + 1] = id
end

--@ win_unindex needs call_chunked ix_prefix
-- Deletes the index entries of the window jobs in `gone` (bucket -> ids): jobs that left
-- their window whole (moved or cancelled in bulk).
local function win_unindex(lane, gone)
  local ixp = ix_prefix(lane)
  for b, ids in pairs(gone) do call_chunked('HDEL', ixp .. b, ids) end
end

--@ win_promote needs rec_due call_chunked lane_dead win_key wins_key wtombs_key win_entry win_tombs win_gone win_unindex
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

--@ lane_find needs lane_entry lane_dead lane_hb win_key ix_entry win_entry
-- The lane entry of `id` (index bucket `ix`), or nil. Returns kind, rec, a, b, c: IX_LANE,
-- its record, its sequence number, the lane's head sequence number and bitmap base (lane_hb)
-- | IX_WINDOW, its record, the window's start, its place there, nil.
local function lane_find(L, id)
  local v = redis.call('HGET', L.ix, id)
  if not v then return nil end
  local kind, s, pos = ix_entry(v)
  if kind == IX_WINDOW then
    local e = redis.call('LINDEX', win_key(L.lane, s), pos)
    if not e or lane_dead(e) then return nil end
    local eid, _, rec = win_entry(e)
    if eid ~= id then return nil end
    return IX_WINDOW, rec, s, pos, nil
  end
  local h, b = lane_hb(L.meta)
  if s < h then return nil end
  local e = redis.call('LINDEX', L.lane, s - h)
  if not e then return nil end
  local eid, rec = lane_entry(e)
  if eid ~= id then return nil end
  return IX_LANE, rec, s, h, b
end

--@ lane_mark
-- Sets the tombstone bit of sequence number `s` (head `h`, base `b`). Once the bits of entries
-- already passed (below `h`) fill 4 KiB, they are cut off the bitmap's front first and the
-- base moves up by as many: the bitmap then spans the lane, not its history.
local function lane_mark(L, s, h, b)
  local stale = math.floor((h - b) / 8)
  if stale >= 4096 then
    local rest = redis.call('GETRANGE', L.gone, stale, -1)
    if rest == '' then
      redis.call('DEL', L.gone)
    else
      redis.call('SET', L.gone, rest)
    end
    b = b + 8 * stale
    redis.call('HSET', L.meta, 'b', b)
  end
  redis.call('SETBIT', L.gone, s - b, 1)
end

--@ lane_unmark_from
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

--@ lane_drop needs rec_due lane_tomb win_key win_tombs lane_find lane_mark
-- Takes job `id` out of the lane: its entry becomes a tombstone, marked gone, that waits for
-- a claim, and its index entry goes. Returns its record, or nil when the lane does not hold it.
local function lane_drop(L, id)
  local kind, rec, s, h, b = lane_find(L, id)
  if not kind then return nil end
  if kind == IX_WINDOW then
    -- (s: the window's start, h: the place in it.)
    redis.call('LSET', win_key(L.lane, s), h, '\0')
    win_tombs(L.lane, s, 1)
    redis.call('HINCRBY', L.meta, 'wn', -1)
  else
    lane_mark(L, s, h, b)
    redis.call('LSET', L.lane, s - h, lane_tomb(rec_due(rec)))
  end
  redis.call('HDEL', L.ix, id)
  return rec
end

--@ lane_pull needs rec_due lane_drop
-- Moves the lane's job `id` to `jobs` and `sched` (same record, same due time), where every
-- path that changes a job by id finds it; false when the lane does not hold it.
local function lane_pull(L, jobs, sched, id)
  local rec = lane_drop(L, id)
  if not rec then return false end
  redis.call('HSET', jobs, id, rec)
  redis.call('ZADD', sched, rec_due(rec), id)
  return true
end

--@ lane_pos needs lane_due
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

--@ lane_trim
-- Drops the first `k` entries (head sequence `h`): claimed jobs and tombstones. Their bits in
-- `lanegone` stay, below the new head, until lane_mark cuts them off.
local function lane_trim(lane, meta, h, k)
  if k <= 0 then return end
  redis.call('LTRIM', lane, k, -1)
  redis.call('HSET', meta, 'h', h + k)
end

--@ lane_spill needs rec_due lane_entry lane_dead lane_due lane_h lane_trim
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

--@ lane_first_due needs lane_due
-- The due time of the lane's first entry, or nil when it is empty.
local function lane_first_due(lane)
  local e = redis.call('LINDEX', lane, 0)
  return e and lane_due(e)
end

--@ leased_raw needs rec_token lane_find cancelled_lease
-- The raw record of `id` when it is leased with `token`, else nil and why: R_MISSING (no
-- such job), R_CANCELLED (no such job: its lease was cancelled while it ran, which `cxl`
-- remembers, when given) or R_LOST (another lease, or not leased: also a job of the lane
-- `L`, when given).
-- A record carries a non-zero token exactly while it is leased (every transition out of
-- `lease` clears it), and tokens are never reused, so the token alone proves the lease.
local function leased_raw(jobs, id, token, L, cxl)
  local raw = redis.call('HGET', jobs, id)
  if not raw then
    if L and lane_find(L, id) then return nil, R_LOST end
    if cxl and cancelled_lease(cxl, id, token) then return nil, R_CANCELLED end
    return nil, R_MISSING
  end
  if token == nil or token == 0 or rec_token(raw) ~= token then
    return nil, R_LOST
  end
  return raw
end

--@ state_of needs lane_find
-- The state code of `id` by the sorted set that holds it, or nil when it does not exist
-- (`ready`: due jobs of a queue with priorities, see promote; `L`: the lane, lane_find).
local function state_of(sched, lease, dead, id, ready, L)
  if redis.call('ZSCORE', sched, id) then return ST_SCHEDULED end
  if L and lane_find(L, id) then return ST_SCHEDULED end
  if ready and redis.call('ZSCORE', ready, id) then return ST_SCHEDULED end
  if redis.call('ZSCORE', lease, id) then return ST_LEASED end
  if redis.call('ZSCORE', dead, id) then return ST_DEAD end
  return nil
end

--@ ack_pairs needs has rec_token call_chunked keep_done rec_keeps cancelled_lease
-- Acknowledges `k` pairs (id, token), pair i `ids[i]`, `tokens[i]`: records of valid
-- leases are deleted — or, with a retention (the job's own extras, else `ret`: the queue's,
-- from queue_retention), kept as done in `done` (keep_done). Returns per pair R_OK, R_LOST or
-- R_CANCELLED (a lease `cxl` remembers as cancelled while it ran) or R_MISSING (nothing
-- changed), how many were kept, and the records read (pair i's before the ack, nil when
-- `jobs` had none: a keyed queue frees the keys of those acked).
-- `in_lane(i, id)`, when given: whether pair i's lane holds `id` (lane_find), asked only
-- about an id `jobs` does not hold. `results`, when given: pair i's handler result, kept
-- with a job kept as done (an empty string: none).
local function ack_pairs(jobs, lease, ids, tokens, k, done_key, ret, now, in_lane, results, cxl)
  local out, gone, kept = {}, {}, {}
  if k == 0 then
    return out, 0
  end
  local raws = redis.call('HMGET', jobs, unpack(ids))
  for i = 1, k do
    local token = tokens[i]
    local raw = raws[i]
    if not raw then
      if in_lane and in_lane(i, ids[i]) then
        out[i] = R_LOST
      elseif cancelled_lease(cxl, ids[i], token) then
        out[i] = R_CANCELLED
      else
        out[i] = R_MISSING
      end
    elseif token ~= 0 and rec_token(raw) == token then
      if ret or (has(string.byte(raw, 2), F_EXTRA) and rec_keeps(raw)) then
        kept[#kept + 1] = i
      else
        gone[#gone + 1] = ids[i]
      end
      out[i] = R_OK
    else
      out[i] = R_LOST
    end
  end
  if #gone > 0 then
    call_chunked('HDEL', jobs, gone)
    call_chunked('ZREM', lease, gone)
  end
  local n = 0
  for _, i in ipairs(kept) do
    local result = results and results[i] ~= '' and results[i] or nil
    if keep_done(jobs, lease, done_key, ids[i], raws[i], ret, now, result) then n = n + 1 end
  end
  return out, n, raws
end

--@ key_indexed needs rec_kp rec_due call_chunked key_index_add key_index_write lane_entry lane_dead lane_hb lane_mark lane_tomb win_key wins_key win_entry win_tombs ix_prefix
-- Makes sure the index holds every keyed job of the shard (K: its keys by field name): once,
-- for a shard whose keyed jobs were written before the index existed (or a lane queue's,
-- whose enqueue leaves the mark to this), in this one call — the keyed jobs of the lane and
-- its time windows move to `jobs` and `sched` (same records, same due times; their entries
-- become tombstones, as a cancel leaves them; the queue is marked keyed, L_KEYS, as an
-- enqueue of them would now), then every job of `sched`, `ready`, `lease` and `dead` is read
-- and the keyed ones indexed. Costs the shard's jobs, once; later calls one STRLEN. A shard
-- that never had a keyed job (no L_KEYS, an empty lane) has nothing to index.
local function key_indexed(K)
  if redis.call('STRLEN', K.kj) > 0 then return end
  local f = string.byte(redis.call('GETRANGE', K.stat, S_FLAGS, S_FLAGS)) or 0
  local L = { lane = K.lane, meta = K.lanemeta, gone = K.lanegone }
  local laned = redis.call('LLEN', L.lane) > 0 or redis.call('ZCARD', wins_key(L.lane)) > 0
  if bit.band(f, L_KEYS) == 0 and not laned then return end
  local hset, zadd = {}, {}
  local function pull(id, rec)
    hset[#hset + 1] = id
    hset[#hset + 1] = rec
    zadd[#zadd + 1] = rec_due(rec)
    zadd[#zadd + 1] = id
  end
  local len = redis.call('LLEN', L.lane)
  for i = 0, len - 1, 1000 do
    local ents = redis.call('LRANGE', L.lane, i, i + 999)
    for j = 1, #ents do
      local e = ents[j]
      if not lane_dead(e) then
        local id, rec = lane_entry(e)
        if rec_kp(rec) ~= '' then
          -- (The head and base are read again: lane_mark may move the base.)
          local h, b = lane_hb(L.meta)
          lane_mark(L, h + i + j - 1, h, b)
          redis.call('LSET', L.lane, i + j - 1, lane_tomb(rec_due(rec)))
          pull(id, rec)
        end
      end
    end
  end
  local starts = redis.call('ZRANGE', wins_key(L.lane), 0, -1, 'WITHSCORES')
  for w = 2, #starts, 2 do
    local s = tonumber(starts[w])
    local wk = win_key(L.lane, s)
    local ents = redis.call('LRANGE', wk, 0, -1)
    for j = 1, #ents do
      if not lane_dead(ents[j]) then
        local id, b, rec = win_entry(ents[j])
        if rec_kp(rec) ~= '' then
          redis.call('LSET', wk, j - 1, '\0')
          win_tombs(L.lane, s, 1)
          redis.call('HINCRBY', L.meta, 'wn', -1)
          redis.call('HDEL', ix_prefix(L.lane) .. b, id)
          pull(id, rec)
        end
      end
    end
  end
  call_chunked('HSET', K.jobs, hset)
  call_chunked('ZADD', K.sched, zadd)
  if #hset > 0 and bit.band(f, L_KEYS) == 0 then
    redis.call('BITFIELD', K.stat, 'SET', 'u8', S_FLAGS * 8, f + L_KEYS)
  end
  local add = {}
  for _, z in ipairs({ K.sched, K.ready, K.lease, K.dead }) do
    local n = redis.call('ZCARD', z)
    for i = 0, n - 1, 2000 do
      local ids = redis.call('ZRANGE', z, i, i + 1999)
      if #ids > 0 then
        local raws = redis.call('HMGET', K.jobs, unpack(ids))
        for j = 1, #ids do
          if raws[j] then
            local k = rec_kp(raws[j])
            if k ~= '' then key_index_add(add, k, ids[j]) end
          end
        end
      end
    end
  end
  key_index_write(K.kj, add)
  redis.call('SET', K.kj, '1')
end
