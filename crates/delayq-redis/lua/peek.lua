-- peek.lua: the order keys of one shard's best due jobs — what a claim on a sharded queue with
-- priorities reads from every due shard first, so that it then claims the best jobs across
-- shards rather than each shard's best.
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] jobs   HASH id -> record
-- KEYS[3] stat   STRING paused flag and flags (L_PRIO: the shard has seen a priority)
-- KEYS[4] ready  ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
--                (common.lua: promote)
-- ARGV[1] n: most keys to return
-- Returns the keys (due ms - priority x aging) of the shard's n best due jobs, best first, in
-- the order a claim of this shard takes them; none when the shard is paused. A shard without
-- L_PRIO holds every job at DEFAULT_PRIORITY (its claim takes them by due time).
-- Safe to run twice: it moves due jobs from `sched` to `ready` exactly as a claim would
-- (promote), which a second run finds done; it leases nothing.
local sched, jobs, stat, ready = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local n = tonumber(ARGV[1])
local now = now_ms()
local flags = redis.call('GETRANGE', stat, S_PAUSED, S_FLAGS)
if string.byte(flags, 1) == 1 or n < 1 then return {} end
local out = {}
if bit.band(string.byte(flags, 2) or 0, L_PRIO) == 0 then
  local due = redis.call('ZRANGEBYSCORE', sched, '-inf', now, 'WITHSCORES', 'LIMIT', 0, n)
  for i = 2, #due, 2 do
    out[#out + 1] = tonumber(due[i]) - DEFAULT_PRIORITY * PRIORITY_AGING_MS
  end
  return out
end
local head = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
if head[2] and tonumber(head[2]) <= now then
  promote(sched, ready, jobs, now, PROMOTE_PER_CALL)
end
local best = redis.call('ZRANGE', ready, 0, n - 1, 'WITHSCORES')
for i = 2, #best, 2 do out[#out + 1] = tonumber(best[i]) end
return out
