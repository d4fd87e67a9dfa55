-- delayq script; constants from Rust written in (scripts.rs)
-- batch_ready.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local bm = KEYS[1]
local op = ARGV[2]
local id = ARGV[3]
local at = tonumber(ARGV[4])
local limit = tonumber(ARGV[5])
local function push_mark(list, id, at) list[#list + 1] = id list[#list + 1] = at end

-- batch_ready.lua: the batches that were left with no pending job in one shard (batch.lua:
-- batch_count marks them in `bm!`), where the sweeps look first; or one of them unmarked.
-- Keys (declared in transitions/batch_ready.rs, which generates the locals):
-- bm        prefix of `bm:<batch>` and of `bm!` (ZSET batch -> when it was marked, ms)
-- Arguments: op ('read': the first `limit` marks; 'unmark': drop the mark of `id` if it is
-- still the one read, `at`), id, at, limit.
-- Returns the marks read (push_mark: batch, ms), none for 'unmark'.
-- Safe to run twice: a read changes nothing; an unmark of a mark already gone, or marked
-- again since (a later time), changes nothing.
local k = bm .. '!'
local out = {}
if op == 'unmark' then
  if tonumber(redis.call('ZSCORE', k, id)) == at then redis.call('ZREM', k, id) end
  return out
end
local got = redis.call('ZRANGE', k, 0, limit - 1, 'WITHSCORES')
for i = 1, #got, 2 do push_mark(out, got[i], tonumber(got[i + 1])) end
return out
