-- batch_shard.lua: one batch's jobs of one shard: their counts (and kept results); closes the
-- batch in this shard, or forgets it.
-- Keys (declared in transitions/batch_shard.rs, which generates the locals):
-- bm        prefix of `bm:<batch>`, the batch's jobs of this shard (batch.lua)
-- Arguments: batch (its id), op ('read'; 'close': no job joins in this shard from now on;
-- 'forget': its jobs' entries deleted), results (answer the kept results too).
-- Returns batch_shard{ counts = {pending, acked, dead, cancelled}, kept = (id, result) … }
-- Safe to run twice: a close marks the shard closed again, a forget finds nothing.
local k = bm .. ':' .. batch
if op == 'forget' then
  redis.call('DEL', k)
  return batch_shard{ counts = { 0, 0, 0, 0 }, kept = {} }
end
if op == 'close' then redis.call('HSET', k, '\0x', 1) end
local n = redis.call('HMGET', k, '\0p', '\0o', '\0d', '\0c')
local counts = {}
for i = 1, 4 do counts[i] = tonumber(n[i] or 0) end
local kept = {}
if results then
  local all = redis.call('HGETALL', k)
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 2) == '\0r' then
      push_kept(kept, string.sub(all[i], 3), all[i + 1])
    end
  end
end
return batch_shard{ counts = counts, kept = kept }
