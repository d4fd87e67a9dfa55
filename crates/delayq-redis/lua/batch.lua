-- batch.lua: helpers of a queue whose jobs join batches (record extra X_BATCH). Included by
-- name (`--@ NAME needs …`) like common.lua's.
--
-- A batch's jobs may be on several shards. Each shard counts its own in `bm:<batch>` (a
-- HASH in the shard's slot): a job joins as `p` (batch_join.lua) and its end changes that
-- field once — to `o` (acked), `d` (dead) or `c` (cancelled) — in the script that ends the
-- job, which moves the counts `\0p`, `\0o`, `\0d`, `\0c` with it (batch_end). A second end of
-- the same job (a dead job requeued and acked, a retried ack) finds no `p` and counts
-- nothing. The batch's home shard holds its state and callbacks (batch_home.lua); a sweep
-- reads every shard's counts and finishes it there (ARCHITECTURE.md, "Batches").

--@ rec_batch needs has
-- The batch of the raw record `raw` ('' for none), read from its extras without decoding
-- the rest.
local function rec_batch(raw)
  local flags = string.byte(raw, 2)
  if not has(flags, F_EXTRA) then return '' end
  local pos = HEADER_LEN + 1
  if has(flags, F_LEASE) then pos = pos + 4 end
  if has(flags, F_BACKOFF) then pos = pos + 9 end
  if has(flags, F_TIMEOUT) then pos = pos + 4 end
  if has(flags, F_EXPIRES) then pos = pos + 6 end
  local n = string.byte(raw, pos)
  pos = pos + 1
  for _ = 1, n do
    local tag = string.byte(raw, pos)
    pos = pos + 1
    if tag == X_PRIORITY then
      pos = pos + 1
    elseif tag == X_KEEP or tag == X_DEDUPE then
      pos = pos + 6
    else
      -- X_TARGET and every sized extra: a u16 length, then the bytes.
      local len = struct.unpack('>H', raw, pos)
      if tag == X_BATCH then return string.sub(raw, pos + 2, pos + 1 + len) end
      pos = pos + 2 + len
    end
  end
  return ''
end

--@ batch_end needs rec_batch
-- Job `id` (its record `raw`, as it was before it ended) ended as `how` — 'o' acked, 'd'
-- dead, 'c' cancelled — in a queue of prefix `bm` (`bm:<batch>` holds its batch's jobs of
-- this shard): counted once, with `result` when the batch keeps results.
local function batch_end(bm, raw, id, how, result)
  local b = rec_batch(raw)
  if b == '' then return end
  local k = bm .. ':' .. b
  if redis.call('HGET', k, id) ~= 'p' then return end
  redis.call('HSET', k, id, how)
  redis.call('HINCRBY', k, '\0' .. how, 1)
  redis.call('HINCRBY', k, '\0p', -1)
  if result and result ~= '' and redis.call('HGET', k, '\0R') then
    redis.call('HSET', k, '\0r' .. id, result)
  end
end
