-- delayq script; constants from Rust written in (scripts.rs)
-- batch_shard.lua: header generated from its declaration in Rust
local clock_offset_us = tonumber(ARGV[1])
local bm = KEYS[1]
local batch = ARGV[2]
local op = ARGV[3]
local results = (ARGV[4] == '1')
local room_count = tonumber(ARGV[5])
local room_bytes = tonumber(ARGV[6])
local function push_kept(list, id, result) list[#list + 1] = id list[#list + 1] = result end
local function batch_shard(t) return { t.counts, t.kept, t.left_out } end

-- batch_shard.lua: one batch's jobs of one shard: their counts (and kept results); closes the
-- batch in this shard, drops its kept results, or forgets it.
-- Keys (declared in transitions/batch_shard.rs, which generates the locals):
-- bm        prefix of `bm:<batch>`, the batch's jobs of this shard, and of `bmr:<batch>`, their
--           kept results (batch.lua)
-- Arguments: batch (its id), op ('read'; 'close': no job joins in this shard from now on;
-- 'drop': its kept results deleted, none kept from now on; 'forget': every entry of it
-- deleted), results (answer kept results too, sorted by job id, up to room_count of them and
-- room_bytes bytes), room_count, room_bytes.
-- Returns batch_shard{ counts = {pending, acked, dead, cancelled}, kept = (id, result) …,
-- left_out = results of this shard not answered (past the room, or never kept) }.
-- Reads at most 1000 results of 1048576 in all (what batch_count keeps), so a
-- run is short whatever the batch's size.
-- Safe to run twice: a close marks the shard closed again, a drop or forget finds nothing.
local k = bm .. ':' .. batch
local rk = bm .. 'r:' .. batch
if op == 'forget' then
  redis.call('DEL', k, rk)
  return batch_shard{ counts = { 0, 0, 0, 0 }, kept = {}, left_out = 0 }
end
if op == 'close' then redis.call('HSET', k, '\0x', 1) end
if op == 'drop' then
  redis.call('DEL', rk)
  redis.call('HDEL', k, '\0R', '\0rn', '\0rb')
end
local n = redis.call('HMGET', k, '\0p', '\0o', '\0d', '\0c', '\0rl')
local counts = {}
for i = 1, 4 do counts[i] = tonumber(n[i] or 0) end
local kept, left = {}, tonumber(n[5] or 0)
if results then
  -- At most 1000 fields of 1048576 in all (batch_count keeps no more).
  local all = redis.call('HGETALL', rk)
  local ids, by = {}, {}
  for i = 1, #all, 2 do
    ids[#ids + 1] = all[i]
    by[all[i]] = all[i + 1]
  end
  table.sort(ids)
  for _, id in ipairs(ids) do
    local r = by[id]
    if room_count > 0 and #r <= room_bytes then
      room_count, room_bytes = room_count - 1, room_bytes - #r
      push_kept(kept, id, r)
    else
      left = left + 1
    end
  end
end
return batch_shard{ counts = counts, kept = kept, left_out = left }
