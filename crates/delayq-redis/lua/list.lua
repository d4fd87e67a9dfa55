-- list.lua: one page of a shard's jobs in one state, by (score, id) (read only).
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] lease  ZSET id -> lease deadline ms
-- KEYS[3] dead   ZSET id -> failed_at ms
-- KEYS[4] jobs   HASH id -> record
-- ARGV[1] which: 's' scheduled (due later than now) | 'd' due | 'l' leased | 'x' dead
-- ARGV[2] page size n
-- ARGV[3] cursor score ('' = from the start), ARGV[4] cursor id: the page starts strictly
--         after (score, id), whether or not that job is still there
-- Returns a flat list, 3 per job: id, score, record — at most n + 1 jobs (one more than the
-- page tells the caller that a next page exists).
-- Safe to run twice: it writes nothing.
local sched, lease, dead, jobs = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local which, n = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
local z = sched
if which == 'l' then z = lease elseif which == 'x' then z = dead end

-- Byte order (what a sorted set uses for equal scores; Lua's `<` follows the locale).
local function bytes_le(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end

-- Rank of the first member after (s, id): the cursor's own rank + 1 while it is there, else
-- a binary search among the members scored s (ZRANGE by rank, log2 of the ties).
local function rank_after(s, id)
  local sc = redis.call('ZSCORE', z, id)
  if sc and tonumber(sc) == s then return redis.call('ZRANK', z, id) + 1 end
  local lo = redis.call('ZCOUNT', z, '-inf', '(' .. s)
  local hi = lo + redis.call('ZCOUNT', z, s, s)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if bytes_le(redis.call('ZRANGE', z, mid, mid)[1], id) then lo = mid + 1 else hi = mid end
  end
  return lo
end

local start = 0
if which == 's' then start = redis.call('ZCOUNT', sched, '-inf', now) end
if ARGV[3] ~= '' then
  local r = rank_after(tonumber(ARGV[3]), ARGV[4])
  if r > start then start = r end
end
local page = redis.call('ZRANGE', z, start, start + n, 'WITHSCORES')
local ids, scores = {}, {}
for i = 1, #page, 2 do
  local score = tonumber(page[i + 1])
  if which == 'd' and score > now then break end
  ids[#ids + 1] = page[i]
  scores[#scores + 1] = score
end
local out = {}
if #ids == 0 then return out end
local raws = redis.call('HMGET', jobs, unpack(ids))
for i = 1, #ids do
  if raws[i] then
    out[#out + 1] = ids[i]
    out[#out + 1] = scores[i]
    out[#out + 1] = raws[i]
  end
end
return out
