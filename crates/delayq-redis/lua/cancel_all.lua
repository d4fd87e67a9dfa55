-- cancel_all.lua: cancels waiting jobs of one kind, a bounded number per call.
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] jobs   HASH id -> record
-- KEYS[3] ready  ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
-- KEYS[4] lane      LIST the one-delay lane (common.lua, above lane_entry)
-- KEYS[5] lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- KEYS[6] lanegone  STRING bitmap of the lane's tombstones (common.lua: lane_mark)
-- ARGV[1] 'd' due jobs (due <= now) | 's' scheduled jobs (due later than now)
-- ARGV[2] most jobs in this call
-- Returns the number cancelled (fewer than ARGV[2]: none of that kind is left). The lane's
-- jobs of that kind go first: the due ones are its first entries, the later ones its last,
-- so they are cut off (LTRIM); their index entries are left behind (common.lua: lane_find
-- never trusts one whose entry is gone).
-- Safe to run twice: a second run cancels only jobs of that kind that exist then (the caller
-- asked for all of them to go).
local sched, jobs, ready = KEYS[1], KEYS[2], KEYS[3]
local lane, lmeta, lgone = KEYS[4], KEYS[5], KEYS[6]
local now = now_ms()
local most = tonumber(ARGV[2])
local from_lane = 0
local len = redis.call('LLEN', lane)
if len > 0 then
  local h, b = lane_hb(lmeta)
  local p = lane_pos(lane, len, now)
  -- The live jobs among the first (the last) k entries, and the smallest k that holds `most`
  -- of them within the due (the later) entries, by binary search on the tombstone counts.
  local function live_of(k)
    if ARGV[1] == 'd' then return k - lane_tombs(lgone, b, h, h + k - 1) end
    return k - lane_tombs(lgone, b, h + len - k, h + len - 1)
  end
  local span = p
  if ARGV[1] ~= 'd' then span = len - p end
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
  if ARGV[1] == 'd' then
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
local ids
if ARGV[1] == 'd' then
  -- Due jobs of a queue with priorities wait in `ready` (all of them due).
  ids = redis.call('ZRANGE', ready, 0, most - 1)
  if #ids > 0 then
    call_chunked('HDEL', jobs, ids)
    call_chunked('ZREM', ready, ids)
    return from_lane + #ids
  end
  ids = redis.call('ZRANGEBYSCORE', sched, '-inf', now, 'LIMIT', 0, most)
else
  ids = redis.call('ZRANGEBYSCORE', sched, '(' .. now, '+inf', 'LIMIT', 0, most)
end
if #ids == 0 then return from_lane end
call_chunked('HDEL', jobs, ids)
call_chunked('ZREM', sched, ids)
return from_lane + #ids
