-- delayq script; constants from Rust written in (scripts.rs)
-- batch_scan.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local batch = KEYS[1]
local bopen = KEYS[2]
local limit = tonumber(ARGV[2])
local open = (ARGV[3] == '1')
local function batch_scan(t) return { t.due, t.open, t.gone } end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + clock_offset_us
end
local function now_ms()
  return math.floor(now_us() / 1000)
end

-- batch_scan.lua: what a sweep has to do with the batches whose home is this shard.
-- Keys (declared in transitions/batch_scan.rs, which generates the locals):
-- batch     prefix of `batch:<id>` (batch_home.lua)
-- bopen     ZSET id -> created ms of the batches not done; `d:<id>` -> when a done one is
--           forgotten
-- Arguments: limit (most entries read), open (answer the open ones too).
-- Returns batch_scan{ due = ids of batches closed or being finished (f), open = ids of open
-- ones (with `open`), gone = ids of done batches whose time is up }, oldest first.
-- Safe to run twice: it changes nothing.
local now = now_ms()
local due, opened, gone = {}, {}, {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', bopen, '-inf', now, 'LIMIT', 0, limit)) do
  if string.sub(m, 1, 2) == 'd:' then
    gone[#gone + 1] = string.sub(m, 3)
  else
    local s = redis.call('HGET', batch .. ':' .. m, 's')
    if s == 'c' or s == 'f' then
      due[#due + 1] = m
    elseif s == 'o' and open then
      opened[#opened + 1] = m
    end
  end
end
return batch_scan{ due = due, open = opened, gone = gone }
