-- delayq script; constants from Rust written in (scripts.rs)
-- key_jobs.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local sched = KEYS[1]
local lease = KEYS[2]
local dead = KEYS[3]
local jobs = KEYS[4]
local ready = KEYS[5]
local stat = KEYS[6]
local lane = KEYS[7]
local lanemeta = KEYS[8]
local lanegone = KEYS[9]
local kj = KEYS[10]
local key = ARGV[2]
local after = ARGV[3]
local n = tonumber(ARGV[4])
local which = tonumber(ARGV[5])
local scan = tonumber(ARGV[6])
local function push_key_job(list, id, state, at, rec) list[#list + 1] = id list[#list + 1] = state list[#list + 1] = at list[#list + 1] = rec end
local function key_page(t) return { t.jobs, t.stopped, t.now } end
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

-- key_jobs.lua: one page of a key's jobs in this shard, by id, through the key index
-- (keyed.lua, above key_index_add).
-- Keys (declared in transitions/key_jobs.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- dead      ZSET id -> failed_at ms
-- jobs      HASH id -> record
-- ready     ZSET a keyed queue's due jobs in turns (keyed.lua)
-- stat      STRING (the flags: 32)
-- lane      LIST the one-delay lane (lane.lua, above lane_entry; key_indexed only)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- kj        STRING: the index is whole; `kj:<key>` ZSET (all scores 0) the key's jobs
-- Arguments: key, after (the page starts strictly after this id; '' from the first), n (the
-- page's size), which (0: every state but done | 1 | 2 | 3 |
-- 4), scan (most index members read in this call).
-- Returns key_page{ jobs, stopped }: jobs (push_key_job: id, state, at, rec) — at most n + 1
-- matching jobs (one more than the page says that a next page exists), `at` the lease deadline
-- or failed-at time (-1 for the other states); stopped: '' or, when the call read `scan`
-- members without finding n + 1, the last id it read (it knows nothing past it); now: the
-- clock it read (ms).
-- Members whose job is gone, done or under another key are dropped (the index's only
-- cleanup; key_indexed may build the index first).
-- Safe to run twice: it writes only the index's cleanup and its one-time build, which a
-- second run finds done.
key_indexed({ kj = kj, stat = stat, lane = lane, lanemeta = lanemeta, lanegone = lanegone,
  jobs = jobs, sched = sched, ready = ready, lease = lease, dead = dead })
local now = now_ms()
local ixk = kj .. ':' .. key
local lo = after == '' and '-' or '(' .. after
local out, found, stale, last, read, ended = {}, 0, {}, nil, 0, false
while found <= n and read < scan do
  local want = math.min(500, scan - read)
  local ids = redis.call('ZRANGE', ixk, lo, '+', 'BYLEX', 'LIMIT', 0, want)
  read = read + #ids
  if #ids > 0 then
    last = ids[#ids]
    lo = '(' .. last
    local raws = redis.call('HMGET', jobs, unpack(ids))
    for i = 1, #ids do
      local id, raw = ids[i], raws[i]
      if not key_member(raw, key) then
        stale[#stale + 1] = id
      elseif found <= n then
        local st, at, listed = 0, -1, 1
        local d = redis.call('ZSCORE', lease, id)
        if d then
          st, at, listed = 1, tonumber(d), 3
        else
          d = redis.call('ZSCORE', dead, id)
          if d then
            st, at, listed = 2, tonumber(d), 4
          elseif rec_due(raw) <= now then
            listed = 2
          end
        end
        if which == 0 or which == listed then
          push_key_job(out, id, st, at, raw)
          found = found + 1
        end
      end
    end
  end
  if #ids < want then
    ended = true
    break
  end
end
if #stale > 0 then call_chunked('ZREM', ixk, stale) end
local stopped = ''
if not ended and found <= n and last then stopped = last end
return key_page{ jobs = out, stopped = stopped, now = now }
