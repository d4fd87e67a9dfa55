-- keyed.lua: helpers of a queue whose jobs carry keys (a tenant, a customer, an upstream
-- host: record extra X_KEY). Included by name (`--@ NAME needs …`) like common.lua's.
--
-- Fairness. A queue that has had a keyed job (L_KEYS at S_FLAGS) keeps its due jobs in
-- `ready` scored by turns instead of due times: a job moved there (key_promote) gets its
-- key's next turn, one past the later of the key's last turn and the queue's turn (the
-- highest turn claimed), both in `kvt` (key -> last turn; the queue's under "\0V"; jobs
-- without a key share the key ""). So the keys with due jobs are served round-robin: a key
-- with 100,000 due jobs holds turns t+1 … t+100,000, and a key whose 100 jobs become due
-- later gets turns t'+1 … t'+100 from the current turn t' on, between the first key's.
-- A higher priority comes first: its turns are KEY_PRIO_SPAN lower per level.
--
-- Limits and holds. `kinfl` counts each key's leased jobs (written for every keyed job, so a
-- limit set later counts from the truth); `khold` holds a paused key's end (ms); `krate` a
-- key's token bucket (tokens, µs). A job whose key may not start now is parked: it stays in
-- `ready` with its turn raised by KEY_PARKED (past every live turn, so claims read past no
-- parked job and every path that finds a due job by id still does), and its id and turn go to
-- `kwait:<key>` (that key's parked jobs); `kwait` holds, per key held by time (a pause, an
-- empty bucket), when to bring one back. A key's next parked job goes back to its turn when
-- the key's leased job ends (key_free), when its wait ends (key_unwait), and after each of
-- its jobs is claimed (a chain: one parked job at a time, each parked again at once if the
-- key is still held).

--@ rec_kp needs rec_extra
-- The key ('' for a job without one) and priority of the raw record `raw`, read from its
-- extras without decoding the rest. Both writers (encode, record.rs) put X_PRIORITY first, so
-- a key found first means no priority.
local function rec_kp(raw)
  local key, prio = '', DEFAULT_PRIORITY
  local at, len, tag = rec_extra(raw, X_KEY, X_PRIORITY)
  if tag == X_PRIORITY then
    prio = string.byte(raw, at)
    at, len = rec_extra(raw, X_KEY)
  end
  if at then key = string.sub(raw, at, at + len - 1) end
  return key, prio
end

--@ key_promote needs rec_kp call_chunked
-- Moves up to `n` due jobs from `sched` to `ready`, each at its key's next turn (see the top
-- of this file); returns how many.
local function key_promote(sched, ready, jobs, kvt, now, n)
  local ids = redis.call('ZRANGEBYSCORE', sched, '-inf', now, 'LIMIT', 0, n)
  if #ids == 0 then return 0 end
  local raws = redis.call('HMGET', jobs, unpack(ids))
  local ks, ps, names, seen = {}, {}, { '\0V' }, {}
  for i = 1, #ids do
    local k, p = '', DEFAULT_PRIORITY
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
    zadd[#zadd + 1] = t - ps[i] * KEY_PRIO_SPAN
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

--@ key_unpark needs call_chunked
-- Brings key `k`'s first `n` parked jobs back to their turns in `ready`; returns how many
-- did. An entry whose job left `ready` meanwhile (cancelled, rescheduled) is dropped.
local function key_unpark(kwait, ready, k, n)
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

--@ key_ended needs rec_kp
-- A leased job (raw record `raw`) ended its lease (acked, failed, released, expired): counts
-- it under its key in `ended` (key -> jobs), for key_free.
local function key_ended(ended, raw)
  local k = rec_kp(raw)
  if k ~= '' then ended[k] = (ended[k] or 0) + 1 end
end

--@ key_free needs key_unpark
-- The leases counted in `ended` (key_ended) are over: each key has that many jobs less in
-- flight, and as many of its parked jobs go back to their turns — one call per key, however
-- many of its jobs ended. Returns whether any came back (the caller wakes consumers).
local function key_free(kinfl, kwait, ready, ended)
  local back = false
  for k, n in pairs(ended) do
    if redis.call('HINCRBY', kinfl, k, -n) <= 0 then redis.call('HDEL', kinfl, k) end
    if key_unpark(kwait, ready, k, n) > 0 then back = true end
  end
  return back
end

--@ key_unwait needs key_unpark
-- Keys whose wait (a hold, an empty bucket) has ended bring parked jobs back (at most 64 keys
-- a call): as many as a key's rate lets start at once (`lim`: key_limits), else up to
-- PROMOTE_PER_CALL (each job taken then brings one more: key_take). Returns when the next
-- wait ends (nil: none).
local function key_unwait(kwait, ready, now, lim)
  local n = PROMOTE_PER_CALL
  if lim and lim.per_s > 0 then n = math.max(1, math.min(lim.burst, n)) end
  local due = redis.call('ZRANGEBYSCORE', kwait, '-inf', now, 'LIMIT', 0, 64)
  for _, k in ipairs(due) do
    redis.call('ZREM', kwait, k)
    key_unpark(kwait, ready, k, n)
  end
  local head = redis.call('ZRANGE', kwait, 0, 0, 'WITHSCORES')
  return head[2] and tonumber(head[2])
end

--@ key_limits
-- Each key's limits (S_KEYLIM, written by shard_settings.lua with L_KLIM), or nil.
local function key_limits(stat, lflags)
  if bit.band(lflags, L_KLIM) == 0 then return nil end
  local s = redis.call('GETRANGE', stat, S_KEYLIM, S_KEYLIM + 15)
  if #s < 16 then return nil end
  local mif, burst, per_s = struct.unpack('>I4I4d', s)
  return { mif = mif, burst = burst, per_s = per_s }
end

--@ key_take needs rec_kp key_unpark key_limits call_chunked
-- Takes up to `max` jobs from the front of a keyed queue's `ready` (K: its keys by field
-- name), parking those whose key may not start now. Returns the ids taken, their raw records
-- (by position) and whether more due jobs may be claimable now.
local function key_take(K, max, now, now_exact_us, lflags)
  local ids, raws = {}, {}
  if max <= 0 then return ids, raws, false end
  local lim = key_limits(K.stat, lflags)
  local window = 2 * max + 32
  local front = redis.call('ZRANGEBYSCORE', K.ready, '-inf', '(' .. KEY_PARKED / 2,
    'WITHSCORES', 'LIMIT', 0, window)
  if #front == 0 then return ids, raws, false end
  local fids = {}
  for i = 1, #front, 2 do fids[#fids + 1] = front[i] end
  local recs = redis.call('HMGET', K.jobs, unpack(fids))
  -- Each key's state, read once: st[k] = { infl, hold, tokens, rate }.
  local kp, st, names = {}, {}, {}
  for i = 1, #fids do
    local k, p = '', DEFAULT_PRIORITY
    if recs[i] then k, p = rec_kp(recs[i]) end
    kp[i] = { k, p }
    if k ~= '' and not st[k] then
      st[k] = { infl = 0 }
      names[#names + 1] = k
    end
  end
  if #names > 0 and lim and lim.mif > 0 then
    local v = redis.call('HMGET', K.kinfl, unpack(names))
    for j = 1, #names do st[names[j]].infl = tonumber(v[j]) or 0 end
  end
  if #names > 0 then
    local v = redis.call('HMGET', K.khold, unpack(names))
    for j = 1, #names do
      local h = tonumber(v[j])
      if h and h <= now then
        redis.call('HDEL', K.khold, names[j])
      else
        st[names[j]].hold = h
      end
    end
  end
  if #names > 0 and lim and lim.per_s > 0 then
    local v = redis.call('HMGET', K.krate, unpack(names))
    for j = 1, #names do
      local tokens = lim.burst
      if v[j] then
        local t, at = struct.unpack('>dd', v[j])
        tokens = math.min(lim.burst, t + (now_exact_us - at) * lim.per_s / 1e6)
      end
      st[names[j]].tokens = tokens
      st[names[j]].rate = true
    end
  end
  local V = nil
  local gone, taken_keys, scanned = {}, {}, 0
  for i = 1, #fids do
    if #ids >= max then break end
    scanned = i
    local id, turn, raw = fids[i], tonumber(front[2 * i]), recs[i]
    local k, p = kp[i][1], kp[i][2]
    local s = st[k]
    local blocked, until_ms = false, nil
    if s then
      if s.hold then
        blocked, until_ms = true, s.hold
      elseif lim and lim.mif > 0 and s.infl >= lim.mif then
        blocked = true
      elseif s.rate and s.tokens < 1 then
        blocked, until_ms = true, now + math.ceil((1 - s.tokens) * 1000 / lim.per_s)
      end
    end
    if not raw then
      gone[#gone + 1] = id
    elseif blocked then
      redis.call('ZADD', K.ready, 'XX', turn + KEY_PARKED, id)
      redis.call('ZADD', K.kwait .. ':' .. k, turn, id)
      if until_ms then redis.call('ZADD', K.kwait, 'LT', until_ms, k) end
    else
      ids[#ids + 1] = id
      raws[#ids] = raw
      local v = turn + p * KEY_PRIO_SPAN
      if not V or v > V then V = v end
      if s then
        s.infl = s.infl + 1
        if s.rate then s.tokens = s.tokens - 1 end
        if not s.taken then
          s.taken = 0
          taken_keys[#taken_keys + 1] = k
        end
        s.taken = s.taken + 1
      end
    end
  end
  if #gone > 0 then call_chunked('ZREM', K.ready, gone) end
  if #ids > 0 then call_chunked('ZREM', K.ready, ids) end
  for _, k in ipairs(taken_keys) do
    local s = st[k]
    redis.call('HINCRBY', K.kinfl, k, s.taken)
    if s.rate then
      redis.call('HSET', K.krate, k, struct.pack('>dd', s.tokens, now_exact_us))
    end
  end
  if V then
    local old = tonumber(redis.call('HGET', K.kvt, '\0V')) or 0
    if V > old then redis.call('HSET', K.kvt, '\0V', V) end
  end
  -- The chain: a key whose job was taken brings its next parked job back (parked again by
  -- the next claim if the key is still held).
  for _, k in ipairs(taken_keys) do key_unpark(K.kwait, K.ready, k, st[k].taken) end
  local more = scanned < #fids or #fids == window
  return ids, raws, more
end

-- The key index. Every job of a key in this shard is a member of the ZSET `kj:<key>`, all
-- scored 0 so they sort by id (a page is ZRANGE … BYLEX): enqueue.lua and batch_join.lua add
-- a keyed job when they write it, an ack and a cancel by id take it out (key_unindex); any
-- other way a job leaves (a bulk cancel of a state, dead letters purged, a replace under
-- another key) leaves its member behind, and the next reader of the key drops it (a member
-- is trusted only when the job's record exists, is not done and carries the key). Keyed jobs
-- never go to the lane (enqueue.lua), so a member is always found in `jobs`. The STRING `kj`
-- says that the index holds every keyed job of the shard: written with the shard's first keyed
-- job, or by key_indexed (lane.lua: it reads the lane) for a shard whose keyed jobs predate the index.

--@ key_index_add
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

--@ key_index_write needs call_chunked
-- Adds the jobs noted in `add` (key_index_add) to their keys' indexes: one ZADD per key.
local function key_index_write(kj, add)
  for k, l in pairs(add) do call_chunked('ZADD', kj .. ':' .. k, l) end
end

--@ key_unindex needs rec_kp
-- Job `id` (raw record `raw`) left the store: out of its key's index, if it has a key.
local function key_unindex(kj, raw, id)
  local k = rec_kp(raw)
  if k ~= '' then redis.call('ZREM', kj .. ':' .. k, id) end
end

--@ key_member needs has rec_kp
-- Whether raw record `raw` (false: none) is a live job of key `k`: what a member of `kj:<k>`
-- must be to be trusted (see above).
local function key_member(raw, k)
  return raw and not has(string.byte(raw, 2), F_DONE) and rec_kp(raw) == k
end
