-- cancel_all.lua: cancels waiting jobs of one kind, a bounded number per call.
-- Keys (declared in transitions/cancel_all.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- jobs      HASH id -> record
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- stat      STRING (the width of the lane's time windows at S_WIDTH, the flags)
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard (batch.lua; only with
--           L_BATCH): a job that ends is counted there
-- Arguments: due_ones (true: due jobs, due <= now; false: scheduled jobs, due later than
-- now), most (jobs in this call).
-- Returns the number cancelled (fewer than `most`: none of that kind is left). The lane's
-- jobs of that kind go first: the due ones are its first entries, the later ones its last,
-- so they are cut off (LTRIM); their index entries are left behind (lane.lua: lane_find
-- never trusts one whose entry is gone). Then the time windows' (lane.lua: win_key): a
-- window wholly of that kind goes whole, its jobs' index entries with it; one across now
-- loses its jobs of that kind entry by entry (tombstones). A call finishes the window it
-- began, so it may cancel up to WIN_MAX more than `most`.
-- Safe to run twice: a second run cancels only jobs of that kind that exist then (the caller
-- asked for all of them to go).
local lmeta, lgone = lanemeta, lanegone
local now = now_ms()
local lflags = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
local batched = bit.band(lflags, L_BATCH) ~= 0
if batched then
  --@ define batch_end batch_count
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
local W = win_width(redis.call('GETRANGE', stat, S_FLAGS, S_WIDTH + 1), S_FLAGS)
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
