-- delayq script; constants from Rust written in (scripts.rs)
-- key_stats.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local ready = KEYS[1]
local jobs = KEYS[2]
local kinfl = KEYS[3]
local khold = KEYS[4]
local kwait = KEYS[5]
local sample = tonumber(ARGV[2])
local function push_key_row(list, key, in_flight, due, held) list[#list + 1] = key list[#list + 1] = in_flight list[#list + 1] = due list[#list + 1] = held end
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
local front = redis.call('ZRANGEBYSCORE', ready, '-inf', '(' .. 1125899906842624 / 2, 'LIMIT', 0,
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
