-- delayq script; constants from Rust written in (scripts.rs)
-- batch_home.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local batch = KEYS[1]
local bopen = KEYS[2]
local op = ARGV[2]
local id = ARGV[3]
local spec = ARGV[4]
local counts = ARGV[5]
local kept_ms = tonumber(ARGV[6])
local reason = ARGV[7]
local retry_ms = tonumber(ARGV[8])
local function batch_home(t) return { t.state, t.spec, t.created, t.done_at, t.counts, t.error, t.attempts, t.retry_at, t.now } end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + clock_offset_us
end
local function now_ms()
  return math.floor(now_us() / 1000)
end

-- batch_home.lua: a batch's own record in its home shard (the shard its id hashes to): its
-- state, callbacks and, once done, its counts.
-- Keys (declared in transitions/batch_home.rs, which generates the locals):
-- batch     prefix of `batch:<id>`, HASH s (state: o open, c closed, f done with callbacks
--           being enqueued, d done), spec (delayq::BatchSpec as JSON), c (created ms),
--           d (done ms), n (the counts when done: "pending acked dead cancelled"), and
--           while its callbacks fail to go in: e (the last error), a (tries), r (next try, ms)
-- bopen     ZSET id -> created ms of the batches not done; `d:<id>` -> when a done one is
--           forgotten
-- Arguments: op, id, spec, counts, kept_ms, reason, retry_ms. op 'open': create it open with
-- `spec` unless it exists; 'close': open -> closed; 'done': closed -> f with `counts`;
-- 'failed': in f, its callbacks failed with `reason`, next try in retry_ms; 'fired': f ->
-- done (its entry in `bopen` moves to `d:<id>`, forgotten after kept_ms); 'read'; 'forget':
-- deleted.
-- Returns batch_home{ state ('' for none), spec, created, done_at, counts, error, attempts,
-- retry_at, now } after the op.
-- Safe to run twice: each op changes only the state it starts from; a second run answers
-- the state the first left.
local now = now_ms()
local k = batch .. ':' .. id
local s = redis.call('HGET', k, 's')
if op == 'open' and not s then
  redis.call('HSET', k, 's', 'o', 'spec', spec, 'c', now)
  redis.call('ZADD', bopen, now, id)
elseif op == 'close' and s == 'o' then
  redis.call('HSET', k, 's', 'c')
elseif op == 'done' and s == 'c' then
  redis.call('HSET', k, 's', 'f', 'd', now, 'n', counts)
elseif op == 'failed' and s == 'f' then
  redis.call('HINCRBY', k, 'a', 1)
  redis.call('HSET', k, 'e', reason, 'r', now + retry_ms)
elseif op == 'fired' and s == 'f' then
  redis.call('HSET', k, 's', 'd')
  redis.call('HDEL', k, 'e', 'a', 'r')
  redis.call('ZREM', bopen, id)
  redis.call('ZADD', bopen, now + kept_ms, 'd:' .. id)
elseif op == 'forget' then
  redis.call('DEL', k)
  redis.call('ZREM', bopen, 'd:' .. id, id)
end
local r = redis.call('HMGET', k, 's', 'spec', 'c', 'd', 'n', 'e', 'a', 'r')
return batch_home{ state = r[1] or '', spec = r[2] or '', created = tonumber(r[3] or 0),
  done_at = tonumber(r[4] or 0), counts = r[5] or '', error = r[6] or '',
  attempts = tonumber(r[7] or 0), retry_at = tonumber(r[8] or 0), now = now }
