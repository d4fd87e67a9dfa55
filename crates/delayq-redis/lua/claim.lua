-- claim.lua: acknowledges finished jobs, recovers expired leases, then leases due jobs.
-- Keys (declared in transitions/claim.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- jobs      HASH id -> record
-- dead      ZSET id -> failed_at ms
-- fence     STRING counter of lease tokens (kept at or past server ms x 64)
-- stat      STRING paused flag (lease nothing), limits (common.lua: limits_read) and
--           series of counts (common.lua: count)
-- wake      channel of the queue's consumers (woken when a full max_in_flight frees)
-- done      ZSET id -> when its retention ends (acked jobs kept as done)
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
--           (common.lua: promote; only with L_PRIO)
-- lane      LIST the one-delay lane (lane.lua, above lane_entry; only with L_LANE)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- kvt       HASH key -> its last turn ("\0V": the queue's; keyed.lua, only with L_KEYS)
-- kinfl     HASH key -> its jobs leased
-- khold     HASH key -> the end of its hold, ms
-- krate     HASH key -> its token bucket (tokens, µs)
-- kwait     ZSET key -> when a parked job comes back; `kwait:<key>` its parked jobs
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard (batch.lua; only with
--           L_BATCH): a job that ends is counted there
-- cxl       ZSET `<token>:<id>` -> until when: leases cancelled while they ran (cancel.lua)
-- kj        prefix of `kj:<key>`, each key's jobs (keyed.lua: key_unindex): an acked keyed job
--           leaves it
-- sweep     (tail; a queue with a lane only) one index bucket `ix:<b>` to sweep of the ids
--           of claimed lane jobs
-- ix        (tail; a queue with a lane only) each ack's index bucket, in order
-- Arguments: max (jobs to lease), default_lease (ms), reap_limit (most expired leases to
-- recover in this call), then the tail `acks` of (id, token, result) as in ack.lua: result is
-- the handler's result kept with a job kept as done (delayq::Ack; empty: none).
-- A queue with a lane claims from the lane's head and `sched` in due order (a lane job's
-- record moves to `jobs` as it is leased, so every later path finds it there); its time
-- windows (lane.lua: win_promote) that start within a width move to `jobs` and `sched`
-- first, PROMOTE_PER_CALL entries a call, and the next one's move counts as a due time.
-- A keyed queue (L_KEYS) claims its due jobs from `ready` in turns, round-robin over their
-- keys, parking the jobs of a key at its limits or paused (keyed.lua: key_take); an ended
-- lease (ack, expiry) frees its key (key_free).
-- A due job past its expiry (record section F_EXPIRES) is dead-lettered with the error
-- 'expired' instead of leased.
-- Returns claim_reply{ acks, jobs, next_us }:
--   acks: per ack R_OK (acked), R_LOST, R_CANCELLED or R_MISSING (nothing changed)
--   jobs: each leased job (push_leased): id, deadline ms, lease ms, record (attempt and token
--   updated)
--   next_us: µs from now until the next due job or lease expiry, -1 when there is none
--   (µs so that a consumer can wake at the due time, not up to a millisecond after it); when
--   a limit holds due jobs back, until the rate limit's next token (a full max_in_flight is
--   woken by the next freed slot instead)
-- Safe to run twice: the acks of a second run answer R_MISSING; it leases the next due jobs
-- under new tokens (the first run's jobs stay leased until their leases expire and come back:
-- at-least-once, never lost).
-- Most lane entries one call reads past its max + 1 (tombstones of cancelled jobs).
local lane_scan = 1024
local now_exact_us = now_us()
local now = math.floor(now_exact_us / 1000)

local flags = redis.call('GETRANGE', stat, S_PAUSED, S_WIDTH + 1)
local is_paused = string.byte(flags, 1) == 1
if is_paused then max = 0 end
local lflags = string.byte(flags, 2) or 0
local ret = nil
if acks_n > 0 then ret = queue_retention(stat, lflags) end
local lane_on = bit.band(lflags, L_LANE) ~= 0
-- The lane's helpers are defined only for a queue with a lane, a keyed queue's only for a
-- keyed queue (scripts.rs: DEFINE): each helper defined costs every call.
local in_lane = nil
if lane_on or ix_n > 0 then
  --@ define lane_find win_width win_promote lane_spill lane_first_due lane_h lane_dead lane_due lane_entry lane_trim ix_entry
  in_lane = ix_n > 0 and function(i, id)
    return lane_find({ lane = lane, meta = lanemeta, ix = KEYS[ix_at + i - 1] }, id)
  end
end
local keyed = bit.band(lflags, L_KEYS) ~= 0
if keyed then
  --@ define key_ended key_free key_unwait key_promote key_take key_limits key_unindex
end
local batched = bit.band(lflags, L_BATCH) ~= 0
-- The ends of batch jobs in this call (batch.lua), counted at its end.
local bacc = nil
if batched then
  --@ define batch_end batch_count
  bacc = {}
end
local acks, kept, acked = ack_pairs(jobs, lease, acks_id, acks_token, acks_n, done, ret, now,
  in_lane, acks_result, cxl)
if kept > 0 or ret then trim_done(jobs, done, now) end
if kept > 0 and not ret then mark_retains(stat) end
-- What this call counts (common.lua: count): counter index -> n.
local c = { [1] = 0, [2] = 0, [3] = 0 }
-- Keys of the leases that end in this call (keyed.lua: key_ended), freed before the claim.
local ended = {}
-- Ends of jobs that others wait for (deps.lua), posted to the outbox at the end.
local dacc = {}
for i = 1, #acks do
  if acks[i] == R_OK then
    c[1] = c[1] + 1
    if keyed then
      key_ended(ended, acked[i])
      key_unindex(kj, acked[i], acks_id[i])
    end
    if batched then batch_end(bacc, acked[i], acks_id[i], 'o', acks_result[i]) end
    dep_end(dacc, acked[i], acks_id[i], 'o', acks_result[i])
  end
end

-- Crash recovery: an expired lease means the consumer died or stalled. The attempt it was
-- given counts; the job is due again now, or dead when attempts are used up. Only read
-- further when the earliest lease has expired (one call in the common case).
local lhead = redis.call('ZRANGE', lease, 0, 0, 'WITHSCORES')
local lease_next = lhead[2] and tonumber(lhead[2])
if lease_next and lease_next <= now then
  local expired = redis.call('ZRANGEBYSCORE', lease, '-inf', now, 'LIMIT', 0, reap_limit)
  for _, id in ipairs(expired) do
    redis.call('ZREM', lease, id)
    local raw = redis.call('HGET', jobs, id)
    if raw then
      if keyed then key_ended(ended, raw) end
      local r = decode(raw)
      r.err = 'lease expired (attempt ' .. r.attempt .. ')'
      if r.attempt >= r.max_attempts then
        bury(jobs, dead, id, r, now)
        if batched then batch_end(bacc, raw, id, 'd') end
        dep_end(dacc, raw, id, 'd')
        c[3] = c[3] + 1
      else
        c[2] = c[2] + 1
        r.token = 0
        r.due = now
        redis.call('HSET', jobs, id, encode(r))
        redis.call('ZADD', sched, now, id)
      end
    end
  end
  lhead = redis.call('ZRANGE', lease, 0, 0, 'WITHSCORES')
  lease_next = lhead[2] and tonumber(lhead[2])
end
if keyed then key_free(kinfl, kwait, ready, ended) end
-- No lease at all: no key has a job in flight (whatever a lost count says).
if keyed and not lease_next then redis.call('DEL', kinfl) end

-- Limits: lease no more than the bucket's whole tokens and the free in-flight slots.
local want, lim = max, nil
if max > 0 and bit.band(lflags, L_ON) ~= 0 then
  lim = limits_read(stat, now_exact_us)
  if lim.per_s > 0 then max = math.min(max, math.floor(lim.tokens)) end
  if lim.mif > 0 then
    lim.leased = redis.call('ZCARD', lease)
    max = math.max(0, math.min(max, lim.mif - lim.leased))
  end
end

local ids = {}
-- The claimed jobs' records taken from the lane (by position in ids), and the ids taken from
-- `from`.
local lane_raws, sids = {}, ids
local next_due = nil
local from = sched
local lmeta = lanemeta
-- When the lane's next time window moves (nil: none, or the queue has no windows).
local wnext = nil
if lane_on and not is_paused then
  local W = win_width(flags, S_PAUSED)
  if W > 0 then
    wnext = win_promote(lane, lmeta, jobs, sched, now, W, PROMOTE_PER_CALL)
  end
end
if keyed then
  -- Keys: due jobs move to `ready` at their keys' turns; the first turns whose keys may start
  -- are claimed (keyed.lua). Due lane jobs go to `sched` first.
  from = ready
  sids = {}
  if lane_on and max > 0 then lane_spill(lane, lmeta, jobs, sched, now, PROMOTE_PER_CALL) end
  local wait_next = nil
  if max > 0 then wait_next = key_unwait(kwait, ready, now, key_limits(stat, lflags)) end
  local head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
  if max > 0 and head[2] and tonumber(head[2]) <= now then
    key_promote(sched, ready, jobs, kvt, now, PROMOTE_PER_CALL)
    head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
  end
  local K = { stat = stat, ready = ready, jobs = jobs, kvt = kvt, kinfl = kinfl, khold = khold,
    krate = krate, kwait = kwait }
  local more
  ids, lane_raws, more = key_take(K, max, now, now_exact_us, lflags)
  if more then next_due = now end
  if next_due == nil and head[2] then next_due = tonumber(head[2]) end
  if wait_next and (next_due == nil or wait_next < next_due) then next_due = wait_next end
  local lf = lane_on and lane_first_due(lane)
  if lf and (next_due == nil or lf < next_due) then next_due = lf end
elseif bit.band(lflags, L_PRIO) == 0 and not lane_on then
  -- The first max + 1 scheduled jobs by due time: the due ones are claimed, the first one not
  -- claimed tells when to come back.
  local head = redis.call('ZRANGE', sched, 0, max, 'WITHSCORES')
  for i = 1, #head, 2 do
    local due = tonumber(head[i + 1])
    if due <= now and #ids < max then
      ids[#ids + 1] = head[i]
    else
      next_due = due
      break
    end
  end
elseif bit.band(lflags, L_PRIO) == 0 then
  -- The lane beside `sched`: the first max + 1 of each, merged by due time.
  sids = {}
  local head = redis.call('ZRANGE', sched, 0, max, 'WITHSCORES')
  -- The lane is read max + 1 entries first, then past tombstones (cancelled jobs) twice as
  -- many each time, up to lane_scan entries more in one call.
  local ents, eof, step = {}, false, max + 1
  local function more()
    if eof or #ents > max + lane_scan then return false end
    local c = redis.call('LRANGE', lane, #ents, #ents + step - 1)
    if #c < step then eof = true end
    step = math.min(2 * step, lane_scan)
    for i = 1, #c do ents[#ents + 1] = c[i] end
    return #c > 0
  end
  more()
  local lh = 0
  if #ents > 0 then lh = lane_h(lmeta) end
  local si, li = 1, 1
  while true do
    while (li <= #ents or more()) and lane_dead(ents[li]) do li = li + 1 end
    local sd = head[2 * si] and tonumber(head[2 * si])
    local ld = li <= #ents and lane_due(ents[li])
    if not ld and not eof then
      -- Tombstones filled what this call may read of the lane: the rest next call.
      next_due = now
      break
    end
    local pick_lane = ld and (not sd or ld <= sd)
    local d = pick_lane and ld or sd
    if not d then break end
    if d > now or #ids >= max then
      next_due = d
      break
    end
    if pick_lane then
      local id, rec = lane_entry(ents[li])
      ids[#ids + 1] = id
      lane_raws[#ids] = rec
      li = li + 1
    else
      ids[#ids + 1] = head[2 * si - 1]
      sids[#sids + 1] = head[2 * si - 1]
      si = si + 1
    end
  end
  if li > 1 then
    local h2 = lh + li - 1
    lane_trim(lane, lmeta, lh, li - 1)
    -- Ids of claimed lane jobs leave the index a bucket at a time (every 32 claimed).
    local ix = sweep_n > 0 and KEYS[sweep_at]
    if ix and math.floor(h2 / 32) ~= math.floor(lh / 32) then
      local all = redis.call('HGETALL', ix)
      local old = {}
      for i = 1, #all, 2 do
        -- (A time window's entry has no sequence number: lane.lua, ix_entry.)
        local kind, s = ix_entry(all[i + 1])
        if kind == IX_LANE and s < h2 then old[#old + 1] = all[i] end
      end
      if #old > 0 then call_chunked('HDEL', ix, old) end
    end
  end
else
  -- Priorities: due jobs move to `ready` (only when the head of `sched` is due: one read in
  -- the common case); the best max of them are claimed. Due lane jobs go to `sched` first.
  from = ready
  if lane_on and max > 0 then lane_spill(lane, lmeta, jobs, sched, now, PROMOTE_PER_CALL) end
  local head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
  if max > 0 and head[2] and tonumber(head[2]) <= now then
    promote(sched, ready, jobs, now, PROMOTE_PER_CALL)
    head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
  end
  local best = redis.call('ZRANGE', ready, 0, max)
  for i = 1, #best do
    if i <= max then ids[#ids + 1] = best[i] else next_due = now end
  end
  if next_due == nil and head[2] then next_due = tonumber(head[2]) end
  local lf = lane_on and lane_first_due(lane)
  if lf and (next_due == nil or lf < next_due) then next_due = lf end
end

if wnext and (next_due == nil or wnext < next_due) then next_due = wnext end

local out, leased = {}, 0
local n = #ids
if n > 0 then
  local raws = {}
  if #sids > 0 then
    redis.call('ZREM', from, unpack(sids))
    local got = redis.call('HMGET', jobs, unpack(sids))
    local j = 0
    for i = 1, n do
      if lane_raws[i] then
        raws[i] = lane_raws[i]
      else
        j = j + 1
        raws[i] = got[j]
      end
    end
  else
    raws = lane_raws
  end
  local token = redis.call('INCRBY', fence, n) - n
  -- Replication is asynchronous: after a failover the counter may be behind tokens the old
  -- master handed out. Tokens never fall behind the server clock (64 per ms), so the new
  -- master's tokens start past any the old one gave (unless it sustained > 64 claims per ms).
  local floor = now * 64
  if token < floor then
    token = floor
    redis.call('SET', fence, floor + n)
  end
  local hset, zadd = {}, {}
  for i = 1, n do
    local raw = raws[i]
    local exp = raw and rec_expires(raw)
    if exp and now > exp then
      -- Expired unstarted: dead-lettered instead of running late.
      local r = decode(raw)
      r.err = 'expired'
      bury(jobs, dead, ids[i], r, now)
      if batched then batch_end(bacc, raw, ids[i], 'd') end
      dep_end(dacc, raw, ids[i], 'd')
      c[3] = c[3] + 1
    elseif raw then
      local id = ids[i]
      token = token + 1
      local rec = rec_claimed(raw, rec_attempt(raw) + 1, token)
      local lease_ms = rec_lease(raw, default_lease)
      local deadline = now + lease_ms
      local b = 3 + late_bucket(now - rec_due(raw))
      c[b] = (c[b] or 0) + 1
      if lease_next == nil or deadline < lease_next then lease_next = deadline end
      hset[#hset + 1] = id
      hset[#hset + 1] = rec
      zadd[#zadd + 1] = deadline
      zadd[#zadd + 1] = id
      push_leased(out, id, deadline, lease_ms, rec)
      leased = leased + 1
    end
  end
  if #hset > 0 then
    redis.call('HSET', jobs, unpack(hset))
    redis.call('ZADD', lease, unpack(zadd))
  end
end

count(stat, now, nil, nil, c)
if batched then batch_count(bm, bacc, now) end
if #dacc > 0 or dacc.forget then dep_post(jobs, dacc, now) end

local held = false
if lim then
  if lim.per_s > 0 then
    lim.tokens = lim.tokens - leased
    redis.call('SETRANGE', stat, S_LIMITS + 16, struct.pack('>dd', lim.tokens, now_exact_us))
  end
  held = next_due ~= nil and next_due <= now and leased < want
  if held then
    -- Due jobs wait on a limit: a full max_in_flight is woken by the next freed slot (and
    -- the next lease expiry), an empty bucket when its next token is due.
    if lim.mif > 0 and lim.leased + leased >= lim.mif then
      next_due = nil
      if bit.band(lflags, L_WAITING) == 0 then
        lflags = lflags + L_WAITING
        redis.call('BITFIELD', stat, 'SET', 'u8', S_FLAGS * 8, lflags)
      end
    elseif lim.per_s > 0 and lim.tokens < 1 then
      next_due = now + math.ceil((1 - lim.tokens) * 1000 / lim.per_s)
    end
  end
end
-- Slots freed by acks or recovered leases wake consumers a full max_in_flight held back,
-- unless this claim was itself held back (they would find the same).
if not held and (c[1] > 0 or c[2] > 0 or c[3] > 0) then
  limit_freed(stat, wake, lflags)
end

-- An acked head may make lease_next early; waking early only costs an empty claim. A paused
-- queue comes back only to recover leases (resuming publishes a wake-up).
local next_ms = nil
if next_due and not is_paused then next_ms = math.max(0, next_due - now) end
if lease_next then
  local l = math.max(0, lease_next - now)
  if next_ms == nil or l < next_ms then next_ms = l end
end
local next_us = -1
if next_ms then next_us = math.max(0, (now + next_ms) * 1000 - now_exact_us) end
return claim_reply{ acks = acks, jobs = out, next_us = next_us }
