-- delayq script; constants from Rust written in (scripts.rs)
-- key_bulk.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local lease = KEYS[2]
local dead = KEYS[3]
local jobs = KEYS[4]
local ready = KEYS[5]
local stat = KEYS[6]
local wake = KEYS[7]
local lane = KEYS[8]
local lanemeta = KEYS[9]
local lanegone = KEYS[10]
local kinfl = KEYS[11]
local kwait = KEYS[12]
local bm = KEYS[13]
local cxl = KEYS[14]
local kj = KEYS[15]
local key = ARGV[2]
local op = tonumber(ARGV[3])
local shift = (ARGV[4] == '1')
local t = tonumber(ARGV[5])
local function key_bulk(t) return { t.n, t.running } end
local rec_batch, batch_end, batch_count, key_unpark, key_free
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
-- Fast accessors of the fixed header.
local function rec_token(rec)
  return (struct.unpack('>I6', rec, 19))
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
local function encode(r)
  local flags = 0
  local parts = {}
  if r.lease then
    flags = flags + 1
    parts[#parts + 1] = struct.pack('>I4', r.lease)
  end
  if r.bkind then
    flags = flags + 2
    parts[#parts + 1] = struct.pack('>BI4I4', r.bkind, r.bbase, r.bcap)
  end
  if r.timeout then
    flags = flags + 8
    parts[#parts + 1] = struct.pack('>I4', r.timeout)
  end
  if r.expires then
    flags = flags + 16
    if r.expires_rel then flags = flags + 32 end
    parts[#parts + 1] = struct.pack('>I6', r.expires)
  end
  local extras = {}
  if r.prio then extras[#extras + 1] = struct.pack('>BB', 1, r.prio) end
  if r.keep then extras[#extras + 1] = struct.pack('>BI6', 2, r.keep) end
  if r.dedupe then extras[#extras + 1] = struct.pack('>BI6', 3, r.dedupe) end
  if r.target then extras[#extras + 1] = struct.pack('>BH', 4, #r.target) .. r.target end
  if r.trace then extras[#extras + 1] = struct.pack('>BH', 16, #r.trace) .. r.trace end
  if r.result then
    extras[#extras + 1] = struct.pack('>BH', 17, #r.result) .. r.result
  end
  if r.sized then
    for i = 1, #r.sized do extras[#extras + 1] = r.sized[i] end
  end
  if #extras > 0 then
    flags = flags + 64
    parts[#parts + 1] = struct.pack('>B', #extras) .. table.concat(extras)
  end
  if r.done_at then
    flags = flags + 128
    parts[#parts + 1] = struct.pack('>I6I6', r.done_at, r.dedupe_until)
  end
  if r.err then
    -- Callers cut errors on a character boundary first (limits::truncate_error); this cut
    -- only bounds what a record can hold.
    local e = string.sub(r.err, 1, 1024)
    flags = flags + 4
    parts[#parts + 1] = struct.pack('>H', #e) .. e
  end
  return struct.pack('>BBHHI6I6I6', 1, flags, r.attempt, r.max_attempts, r.due, r.created,
    r.token or 0) .. table.concat(parts) .. r.payload
end
-- Where the optional section after the timeout starts in a raw record of flags `flags` (the
-- expiry, else the extras): the lease, backoff and timeout sections skipped by their fixed
-- widths, without decoding them.
local function rec_fixed(flags)
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
local function rec_extra(raw, want, also)
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
-- Runs `cmd key a1 a2 ...` over a flat list in chunks (Lua's unpack limit is ~8000 values).
local function call_chunked(cmd, key, list)
  local step = 2000
  for i = 1, #list, step do
    local j = math.min(i + step - 1, #list)
    redis.call(cmd, key, unpack(list, i, j))
  end
end
-- Tells waiting consumers that a job due at `due` exists, if it is earlier than the head
-- they are sleeping towards (and than `bound`, when given: the lane's first due time). Call
-- before adding the job to `sched`.
local function wake_if_earlier(sched, wake, due, bound)
  if bound and due >= bound then return end
  local head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
  if head[2] == nil or due < tonumber(head[2]) then
    redis.call('PUBLISH', wake, due)
  end
end
-- Slots were freed (an ack, nack or release): wakes the consumers a full max_in_flight held
-- back, if any (`flags`: the byte at 1 when the caller has read it).
local function limit_freed(stat, wake, flags)
  flags = flags or string.byte(redis.call('GETRANGE', stat, 1, 1)) or 0
  if bit.band(flags, 2) ~= 0 then
    redis.call('BITFIELD', stat, 'SET', 'u8', 1 * 8, flags - 2)
    redis.call('PUBLISH', wake, 0)
  end
end

-- Priorities (delayq::NewJob::priority): a queue that has had a job with a priority (the byte
-- at 1 has 8) keeps its due jobs in `ready`, scored by due time minus
-- 60000 per priority level: claims take the lowest score first, so a higher
-- priority goes first and a job gains a level for every 60000 it waits (none
-- starves). A job enters `ready` when it is due (promote), never before.
-- The key ('' for a job without one) and priority of the raw record `raw`, read from its
-- extras without decoding the rest. Both writers (encode, record.rs) put 1 first, so
-- a key found first means no priority.
local function rec_kp(raw)
  local key, prio = '', 5
  local at, len, tag = rec_extra(raw, 18, 1)
  if tag == 1 then
    prio = string.byte(raw, at)
    at, len = rec_extra(raw, 18)
  end
  if at then key = string.sub(raw, at, at + len - 1) end
  return key, prio
end
-- Notes job `id` of key `k` in `add` (key -> ids), for key_index_write.
local function key_index_add(add, k, id)
  local l = add[k]
  if not l then
    l = {}
    add[k] = l
  end
  l[#l + 1] = 0
  l[#l + 1] = id
end
-- Adds the jobs noted in `add` (key_index_add) to their keys' indexes: one ZADD per key.
local function key_index_write(kj, add)
  for k, l in pairs(add) do call_chunked('ZADD', kj .. ':' .. k, l) end
end
-- Whether raw record `raw` (false: none) is a live job of key `k`: what a member of `kj:<k>`
-- must be to be trusted (see above).
local function key_member(raw, k)
  return raw and not has(string.byte(raw, 2), 128) and rec_kp(raw) == k
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
-- What a cancelled entry keeps of its job: its due time (7 bytes instead of the whole job; no
-- id has length 0, so lane_find never takes it for a job).
local function lane_tomb(due)
  return '\0' .. struct.pack('>I6', due)
end
-- The lane's head sequence number and the sequence number of bit 0 of `lanegone`.
local function lane_hb(meta)
  local v = redis.call('HMGET', meta, 'h', 'b')
  return tonumber(v[1] or 0), tonumber(v[2] or 0)
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
-- Makes sure the index holds every keyed job of the shard (K: its keys by field name): once,
-- for a shard whose keyed jobs were written before the index existed (or a lane queue's,
-- whose enqueue leaves the mark to this), in this one call — the keyed jobs of the lane and
-- its time windows move to `jobs` and `sched` (same records, same due times; their entries
-- become tombstones, as a cancel leaves them; the queue is marked keyed, 32, as an
-- enqueue of them would now), then every job of `sched`, `ready`, `lease` and `dead` is read
-- and the keyed ones indexed. Costs the shard's jobs, once; later calls one STRLEN. A shard
-- that never had a keyed job (no 32, an empty lane) has nothing to index.
local function key_indexed(K)
  if redis.call('STRLEN', K.kj) > 0 then return end
  local f = string.byte(redis.call('GETRANGE', K.stat, 1, 1)) or 0
  local L = { lane = K.lane, meta = K.lanemeta, gone = K.lanegone }
  local laned = redis.call('LLEN', L.lane) > 0 or redis.call('ZCARD', wins_key(L.lane)) > 0
  if bit.band(f, 32) == 0 and not laned then return end
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
  if #hset > 0 and bit.band(f, 32) == 0 then
    redis.call('BITFIELD', K.stat, 'SET', 'u8', 1 * 8, f + 32)
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

-- key_bulk.lua: every waiting job of a key in this shard at once, through the key index
-- (keyed.lua, above key_index_add): cancelled (with `running` its leased jobs too, each ended
-- as cancel.lua ends one) or moved to new due times.
-- Keys (declared in transitions/key_bulk.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- dead      ZSET id -> failed_at ms
-- jobs      HASH id -> record
-- ready     ZSET a keyed queue's due jobs in turns (keyed.lua)
-- stat      STRING the flags (32, 128, 2)
-- wake      channel of the queue's consumers (an earlier due time; a freed slot)
-- lane      LIST the one-delay lane (lane.lua, above lane_entry; key_indexed only)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- kinfl     HASH key -> its jobs leased (keyed.lua: key_free; `running` only)
-- kwait     ZSET key -> when a parked job comes back (keyed.lua; `running` only)
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard: a job that ends is
--           counted there (batch.lua)
-- cxl       ZSET `<token>:<id>` -> until when (ms) a lease cancelled while it ran answers
--           `cancelled` (cancel.lua)
-- kj        STRING: the index is whole; `kj:<key>` ZSET (all scores 0) the key's jobs
-- Arguments: key, op (1 | 2 | 3), shift (3: true,
-- each job by `t` ms from its due time, never before now unless it was due already; false:
-- all to `t`), t (ms).
-- Returns key_bulk{ n, running }: jobs cancelled or moved, and of the cancelled ones those
-- that were running. Scheduled and due jobs (parked ones too) are cancelled or moved; leased
-- ones only cancelled with 2; dead and done jobs stay. A moved job goes to
-- `sched` at its new time (a due one leaves `ready`: it gets a new turn when it is due again).
-- Safe to run twice: a second cancel finds the jobs gone (their members left the index) and
-- answers 0; a second move with `shift` moves the jobs again by `t` — the caller asked for one
-- move and sends it once (an absolute move is the same twice).
key_indexed({ kj = kj, stat = stat, lane = lane, lanemeta = lanemeta, lanegone = lanegone,
  jobs = jobs, sched = sched, ready = ready, lease = lease, dead = dead })
local ixk = kj .. ':' .. key
local ids = redis.call('ZRANGE', ixk, 0, -1)
if #ids == 0 then return key_bulk{ n = 0, running = 0 } end
local now = now_ms()
local lflags = string.byte(redis.call('GETRANGE', stat, 1, 1)) or 0
local batched = bit.band(lflags, 128) ~= 0
if batched then
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
local bacc = {}
local gone, done_n, running_n = {}, 0, 0
-- 3: the new due times (ZADD's pairs) and the earliest.
local zadd, earliest = {}, nil
-- Leases ended (2): their keys' slots and the `cxl` entries.
local ended, cxl_add = {}, {}
for c = 1, #ids, 1000 do
  local part = { unpack(ids, c, math.min(c + 999, #ids)) }
  local raws = redis.call('HMGET', jobs, unpack(part))
  for i = 1, #part do
    local id, raw = part[i], raws[i]
    if not key_member(raw, key) then
      gone[#gone + 1] = id
    elseif op == 3 then
      if redis.call('ZSCORE', sched, id) or redis.call('ZREM', ready, id) == 1 then
        local due = rec_due(raw)
        local to = t
        if shift then
          to = due + t
          if to < now then to = math.min(now, due) end
        end
        local r = decode(raw)
        r.due = to
        redis.call('HSET', jobs, id, encode(r))
        zadd[#zadd + 1] = to
        zadd[#zadd + 1] = id
        if not earliest or to < earliest then earliest = to end
        done_n = done_n + 1
      end
    elseif redis.call('ZREM', sched, id) == 1 or redis.call('ZREM', ready, id) == 1 then
      redis.call('HDEL', jobs, id)
      if batched then batch_end(bacc, raw, id, 'c') end
      gone[#gone + 1] = id
      done_n = done_n + 1
    elseif op == 2 then
      local deadline = redis.call('ZSCORE', lease, id)
      if deadline then
        redis.call('ZREM', lease, id)
        redis.call('HDEL', jobs, id)
        if batched then batch_end(bacc, raw, id, 'c') end
        ended[key] = (ended[key] or 0) + 1
        cxl_add[#cxl_add + 1] = tonumber(deadline) + 3600000
        cxl_add[#cxl_add + 1] = string.format('%d', rec_token(raw)) .. ':' .. id
        gone[#gone + 1] = id
        done_n = done_n + 1
        running_n = running_n + 1
      end
    end
  end
end
if #gone > 0 then call_chunked('ZREM', ixk, gone) end
if earliest then
  wake_if_earlier(sched, wake, earliest)
  call_chunked('ZADD', sched, zadd)
end
if batched then batch_count(bm, bacc, now) end
if running_n > 0 then
-- Brings key `k`'s first `n` parked jobs back to their turns in `ready`; returns how many
-- did. An entry whose job left `ready` meanwhile (cancelled, rescheduled) is dropped.
key_unpark = function(kwait, ready, k, n)
  local parked = kwait .. ':' .. k
  local h = redis.call('ZRANGE', parked, 0, n - 1, 'WITHSCORES')
  if #h == 0 then return 0 end
  local ids, back = {}, 0
  for i = 1, #h, 2 do
    ids[#ids + 1] = h[i]
    back = back + redis.call('ZADD', ready, 'XX', 'CH', h[i + 1], h[i])
  end
  call_chunked('ZREM', parked, ids)
  return back
end
-- The leases counted in `ended` (key_ended) are over: each key has that many jobs less in
-- flight, and as many of its parked jobs go back to their turns — one call per key, however
-- many of its jobs ended. Returns whether any came back (the caller wakes consumers).
key_free = function(kinfl, kwait, ready, ended)
  local back = false
  for k, n in pairs(ended) do
    if redis.call('HINCRBY', kinfl, k, -n) <= 0 then redis.call('HDEL', kinfl, k) end
    if key_unpark(kwait, ready, k, n) > 0 then back = true end
  end
  return back
end
  if key_free(kinfl, kwait, ready, ended) then redis.call('PUBLISH', wake, 0) end
  limit_freed(stat, wake, lflags)
  local old = redis.call('ZRANGEBYSCORE', cxl, '-inf', now, 'LIMIT', 0, 100)
  if #old > 0 then redis.call('ZREM', cxl, unpack(old)) end
  call_chunked('ZADD', cxl, cxl_add)
end
return key_bulk{ n = done_n, running = running_n }
