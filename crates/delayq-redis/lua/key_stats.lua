-- key_stats.lua: the keys of one shard with jobs in flight, due or held, for the console's
-- busiest keys (read only).
-- Keys (declared in transitions/key_stats.rs, which generates the locals):
-- ready     ZSET a keyed queue's due jobs in turns (keyed.lua)
-- jobs      HASH id -> record
-- kinfl     HASH key -> jobs leased
-- khold     HASH key -> the end of its hold, ms
-- kwait     ZSET key -> when one of its parked jobs comes back; `kwait:<key>` its parked jobs
-- Arguments: sample (most due jobs read from the front of `ready`, and most waiting keys
-- read from `kwait`).
-- Returns per key (push_key_row): key, in flight, due (its parked jobs, and its jobs among the
-- first `sample` due ones), held until (ms; 0: not held).
-- Safe to run twice: it writes nothing.
local now = now_ms()
local rows, order = {}, {}
local function row(k)
  local r = rows[k]
  if not r then
    r = { infl = 0, due = 0, held = 0 }
    rows[k] = r
    order[#order + 1] = k
  end
  return r
end
local function each(hash, f)
  local all = redis.call('HGETALL', hash)
  for i = 1, #all, 2 do f(all[i], all[i + 1]) end
end
each(kinfl, function(k, v) row(k).infl = tonumber(v) end)
each(khold, function(k, v)
  if tonumber(v) > now then row(k).held = tonumber(v) end
end)
local front = redis.call('ZRANGEBYSCORE', ready, '-inf', '(' .. KEY_PARKED / 2, 'LIMIT', 0,
  sample)
if #front > 0 then
  local raws = redis.call('HMGET', jobs, unpack(front))
  for i = 1, #raws do
    if raws[i] then
      local k = rec_kp(raws[i])
      if k ~= '' then row(k).due = row(k).due + 1 end
    end
  end
end
local waiting = redis.call('ZRANGE', kwait, 0, sample - 1)
for _, k in ipairs(waiting) do row(k) end
local out = {}
for _, k in ipairs(order) do
  local r = rows[k]
  r.due = r.due + redis.call('ZCARD', kwait .. ':' .. k)
  if r.infl > 0 or r.due > 0 or r.held > 0 then push_key_row(out, k, r.infl, r.due, r.held) end
end
return out
