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

--@ rec_batch needs rec_extra
-- The batch of the raw record `raw` ('' for none), read from its extras without decoding
-- the rest.
local function rec_batch(raw)
  local at, len = rec_extra(raw, X_BATCH)
  if not at then return '' end
  return string.sub(raw, at, at + len - 1)
end

--@ batch_end needs rec_batch
-- Job `id` (its record `raw`, as it was before it ended) ended as `how` — 'o' acked, 'd'
-- dead, 'c' cancelled — with `result` (an ack's, or nil): noted in `acc` (batch -> its ends in
-- this call), counted by batch_count at the end of the script.
local function batch_end(acc, raw, id, how, result)
  local b = rec_batch(raw)
  if b == '' then return end
  local a = acc[b]
  if not a then
    a = { ids = {}, hows = {}, results = {} }
    acc[b] = a
  end
  local n = #a.ids + 1
  a.ids[n] = id
  a.hows[n] = how
  a.results[n] = result or false
end

--@ batch_count needs call_chunked
-- Counts the ends noted in `acc` (batch_end) in their batches' `bm:<batch>` hashes of a queue
-- of prefix `bm`, a batch at a time (one read, one write and the counts, whatever the number
-- of its jobs): only a job still pending changes, so each job is counted once. When the
-- batch keeps results, an acked job's result goes to `bmr:<batch>` (HASH id -> result) while
-- the shard's kept results stay within what a callback carries (MAX_CB_RESULTS results,
-- MAX_CB_BYTES bytes: `\0rn`, `\0rb` in `bm:<batch>`); past that it is only counted
-- (`\0rl`, left out), so a batch costs what its callback carries. A batch left with no
-- pending job in this shard is marked in `bm!` (ZSET batch -> `now`), where the sweeps look
-- first (batch_ready.lua).
local function batch_count(bm, acc, now)
  for b, a in pairs(acc) do
    local k = bm .. ':' .. b
    local kr = redis.call('HMGET', k, '\0R', '\0rn', '\0rb')
    local keep, kn, kb, left = kr[1], tonumber(kr[2] or 0), tonumber(kr[3] or 0), 0
    local set, kept, n, total = {}, {}, { o = 0, d = 0, c = 0 }, 0
    for i = 1, #a.ids, 1000 do
      local st = redis.call('HMGET', k, unpack(a.ids, i, math.min(i + 999, #a.ids)))
      for j = 1, #st do
        local x = i + j - 1
        if st[j] == 'p' then
          local id, how, r = a.ids[x], a.hows[x], a.results[x]
          set[#set + 1] = id
          set[#set + 1] = how
          n[how] = n[how] + 1
          total = total + 1
          if keep and r and r ~= '' then
            if kn < MAX_CB_RESULTS and kb + #r <= MAX_CB_BYTES then
              kn, kb = kn + 1, kb + #r
              kept[#kept + 1] = id
              kept[#kept + 1] = r
            else
              left = left + 1
            end
          end
        end
      end
    end
    if total > 0 then
      call_chunked('HSET', k, set)
      for how, c in pairs(n) do
        if c > 0 then redis.call('HINCRBY', k, '\0' .. how, c) end
      end
      if #kept > 0 then
        call_chunked('HSET', bm .. 'r:' .. b, kept)
        redis.call('HSET', k, '\0rn', kn, '\0rb', kb)
      end
      if left > 0 then redis.call('HINCRBY', k, '\0rl', left) end
      if redis.call('HINCRBY', k, '\0p', -total) <= 0 then
        redis.call('ZADD', bm .. '!', now, b)
      end
    end
  end
end
