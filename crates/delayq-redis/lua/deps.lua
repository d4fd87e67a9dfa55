-- deps.lua: helpers of jobs that wait for other jobs (delayq::deps). Included by name
-- (`--@ NAME needs …`) like common.lua's.
--
-- A dependent D (record extra X_DEPS: its failure policy, whether its claim carries results)
-- waits in its shard's `waiting` (id -> due ms), never claimed, with `dg:<D>` (HASH): `\0n`
-- its dependencies still pending, and per dependency `<queue>\0<id>` -> `p` | `o` | `d` | `c`
-- (pending, done, dead, cancelled) and `\0r<queue>\0<id>` -> its result (when D asked;
-- `\0x` the first failed one).
-- A dependency X (record extra X_WATCHED) keeps its waiters in `dw:<X>` (in X's shard):
-- `<D's key prefix>\0<D>` -> `r` (D wants X's result) or `1`. No script spans two slots, so
-- when X ends (acked, dead, cancelled), the script that ends it posts one entry per waiter to
-- its shard's outbox `dout` (ZSET: `<D prefix>\0<D>\0<X queue>\0<X>\0<how>` -> ms; a result
-- in `doutr`, HASH member -> result), and the backend delivers each to D's shard
-- (dep_release.lua: a field changes from `p` only, so a delivery repeated after a crash counts
-- nothing) and then removes it: an end is delivered at least once, counted once.

--@ dep_end needs has rec_extra
-- Job `id` (raw record `raw`, as it was before it ended) ended as `how` ('o' acked, 'd' dead,
-- 'c' cancelled) with `result` (nil: none): noted in `acc` when jobs wait for it (X_WATCHED),
-- and its own dependency state forgotten when it waited itself (X_DEPS) — for dep_post.
local function dep_end(acc, raw, id, how, result)
  if not has(string.byte(raw, 2), F_EXTRA) then return end
  if rec_extra(raw, X_WATCHED) then acc[#acc + 1] = { id = id, how = how, result = result } end
  if rec_extra(raw, X_DEPS) then
    acc.forget = acc.forget or {}
    acc.forget[#acc.forget + 1] = id
  end
end

--@ dep_prefix
-- The prefix of this shard's keys (`dq:{q}:`), from one of them (`jobs`).
local function dep_prefix(jobs)
  return string.sub(jobs, 1, -5)
end

--@ dep_post needs dep_prefix
-- Posts the ends noted in `acc` (dep_end) to the outbox of this shard (`jobs` names it): one
-- entry per waiter of each, its waiters then forgotten; the dependency state of the ended
-- dependents goes. Returns how many entries it posted (the caller's reply says so: the
-- backend delivers them).
local function dep_post(jobs, acc, now)
  local P = dep_prefix(jobs)
  local xq = string.match(P, '{([^}#]*)')
  local posted = 0
  for _, e in ipairs(acc) do
    local w = redis.call('HGETALL', P .. 'dw:' .. e.id)
    if #w > 0 then
      redis.call('DEL', P .. 'dw:' .. e.id)
      for i = 1, #w, 2 do
        local m = w[i] .. '\0' .. xq .. '\0' .. e.id .. '\0' .. e.how
        redis.call('ZADD', P .. 'dout', now, m)
        if w[i + 1] == 'r' and e.result and e.result ~= '' then
          redis.call('HSET', P .. 'doutr', m, e.result)
        end
        posted = posted + 1
      end
    end
  end
  if acc.forget then
    for _, id in ipairs(acc.forget) do redis.call('DEL', P .. 'dg:' .. id) end
  end
  return posted
end
