-- ack.lua: acknowledges leased jobs: their records are deleted.
-- KEYS[1] lease  ZSET id -> lease deadline ms
-- KEYS[2] jobs   HASH id -> record
-- KEYS[3] stat   STRING paused flag, limits and series of counts (common.lua: count)
-- KEYS[4] wake   channel of the queue's consumers (woken when a full max_in_flight frees)
-- ARGV: pairs id, token
-- Returns one code per pair: R_OK (acked), R_LOST (the job exists under another lease or
-- none), R_MISSING (no such job); refused pairs change nothing.
-- Safe to run twice: a second run finds the records gone and answers R_MISSING, changing
-- nothing (a client that resends after a lost reply reads R_MISSING as "done or cancelled").
local out = ack_pairs(KEYS[2], KEYS[1], ARGV, 1, #ARGV / 2)
local done = 0
for i = 1, #out do
  if out[i] == R_OK then done = done + 1 end
end
if done > 0 then
  count(KEYS[3], now_ms(), 1, done)
  limit_freed(KEYS[3], KEYS[4])
end
return out
