-- ops.lua: one operation timed inside the script (TIME before and after), on the data of
-- fill.lua. Lab code, not delayq's scripts.
-- KEYS: none. ARGV[1] op: zset_lookup | zset_cancel | zset_claim | lane_lookup | lane_cancel |
--   lane_claim_indexed (first version: each claimed id checked in and removed from the index) |
--   lane_claim (second version: no index work, lane:dead checked, one bucket swept);
--   ARGV[2] rounds (ids for look-up and cancel, spread over the queue; claims of 64 jobs);
--   ARGV[3] bucket count (lane ops).
-- Returns {operations done, µs per operation (per job for claims)}. Run twice it works on what
-- the first run left (claims take the next 64s; cancels find fewer ids).
local op, rounds, nb = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local function us() local t = redis.call('TIME'); return t[1] * 1e6 + t[2] end
local t0 = us()
local done = 0
local function spread(head, len, r) return head + math.floor((r - 0.5) * len / rounds) end
-- The lane's first 64 entries and the head's sequence number.
local function lane_head()
  return redis.call('LRANGE', 'lane', 0, 63), tonumber(redis.call('GET', 'lanehead'))
end
-- An entry's bucket, id and record (what a claim hands out; read in both lane claims, as the
-- sorted set's claim reads its records with HMGET).
local function lane_entry(e)
  local b, n = struct.unpack('>I2B', e)
  return b, string.sub(e, 4, 3 + n), string.sub(e, 4 + n)
end
-- Drops the claimed entries `es` from the lane; the new head's sequence number.
local function lane_drop(es)
  redis.call('LTRIM', 'lane', #es, -1)
  return redis.call('INCRBY', 'lanehead', #es)
end
if op == 'zset_claim' then
  for _ = 1, rounds do
    local ids = redis.call('ZRANGEBYSCORE', 'sched', '-inf', '+inf', 'LIMIT', 0, 64)
    if #ids == 0 then break end
    redis.call('HMGET', 'jobs', unpack(ids))
    redis.call('ZREM', 'sched', unpack(ids))
    redis.call('HDEL', 'jobs', unpack(ids))
    done = done + #ids
  end
elseif op == 'zset_lookup' or op == 'zset_cancel' then
  local head = tonumber(string.sub(redis.call('ZRANGE', 'sched', 0, 0)[1], 2))
  local len = redis.call('ZCARD', 'sched')
  for r = 1, rounds do
    local id = string.format('1%019d', spread(head, len, r))
    if op == 'zset_cancel' then
      if redis.call('ZREM', 'sched', id) == 1 then
        redis.call('HDEL', 'jobs', id)
        done = done + 1
      end
    elseif redis.call('HGET', 'jobs', id) then
      redis.call('ZSCORE', 'sched', id)
      done = done + 1
    end
  end
elseif op == 'lane_claim_indexed' then
  for _ = 1, rounds do
    local es, head = lane_head()
    if #es == 0 then break end
    for k, e in ipairs(es) do
      local b, id = lane_entry(e)
      if tonumber(redis.call('HGET', 'ix:' .. b, id)) == head + k - 1 then
        redis.call('HDEL', 'ix:' .. b, id)
        done = done + 1
      end
    end
    lane_drop(es)
  end
elseif op == 'lane_claim' then
  for _ = 1, rounds do
    local es, head = lane_head()
    if #es == 0 then break end
    local dead = nil
    if redis.call('SCARD', 'lane:dead') > 0 then
      local seqs = {}
      for k = 1, #es do seqs[k] = head + k - 1 end
      dead = redis.call('SMISMEMBER', 'lane:dead', unpack(seqs))
    end
    local gone = {}
    for k, e in ipairs(es) do
      if dead and dead[k] == 1 then
        gone[#gone + 1] = head + k - 1
      else
        lane_entry(e)
        done = done + 1
      end
    end
    if #gone > 0 then redis.call('SREM', 'lane:dead', unpack(gone)) end
    head = lane_drop(es)
    local sb = redis.call('INCR', 'lanesweep') % nb
    local kv = redis.call('HGETALL', 'ix:' .. sb)
    local stale = {}
    for k = 1, #kv, 2 do
      if tonumber(kv[k + 1]) < head then stale[#stale + 1] = kv[k] end
    end
    if #stale > 0 then redis.call('HDEL', 'ix:' .. sb, unpack(stale)) end
  end
elseif op == 'lane_lookup' or op == 'lane_cancel' then
  local head = tonumber(redis.call('GET', 'lanehead'))
  local len = redis.call('LLEN', 'lane')
  for r = 1, rounds do
    local i = spread(head, len, r)
    local id = string.format('1%019d', i)
    local b = i % nb
    local seq = redis.call('HGET', 'ix:' .. b, id)
    if seq and tonumber(seq) >= head then
      if op == 'lane_cancel' then
        redis.call('HDEL', 'ix:' .. b, id)
        redis.call('SADD', 'lane:dead', seq)
      elseif not redis.call('LINDEX', 'lane', tonumber(seq) - head) then
        return redis.error_reply('lane entry missing for ' .. id)
      end
      done = done + 1
    end
  end
else
  return redis.error_reply('unknown op ' .. tostring(op))
end
return { done, tostring((us() - t0) / math.max(done, 1)) }
