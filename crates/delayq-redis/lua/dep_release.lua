-- dep_release.lua: tells a dependent how some of its dependencies ended, and settles it (deps.lua,
-- at the top).
-- Keys (declared in transitions/dep_release.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- jobs      HASH id -> record
-- dead      ZSET id -> failed_at ms
-- waiting   ZSET id -> due_ms: jobs waiting for their dependencies
-- wake      channel of the queue's consumers (a dependent due before the head)
-- stat      STRING flags (L_BATCH) and series of counts
-- bm        prefix of `bm:<batch>`, each batch's jobs of this shard (batch.lua): a dependent
--           that ends is counted there
-- dreg      ZSET id -> ms: dependents whose waiters are not all registered yet
-- Arguments: id (the dependent), registered (its waiters are all registered now: it leaves
-- `dreg`), then the tail `ends` of (field, how, result): a dependency (`<queue>\0<id>`), how it
-- ended (`o`, `d`, `c`) and its result ('' : none).
-- A field changes from `p` only (so an end delivered twice counts once), `\0n` counting the
-- pending ones and `\0x` keeping the first failed one; results are kept while they fit
-- MAX_DEP_RESULT_BYTES together (`\0rb`), later ones left out. Then a waiting dependent settles: a
-- failed dependency dead-letters it (`last_error` naming the dependency) or cancels it, by
-- its policy (X_DEPS), unless the policy is to run; with none pending it moves to `sched`,
-- due at the later of its due time and now. A dependent that ends this way is itself a
-- dependency that ended: its waiters are posted to the outbox (deps.lua: dep_post).
-- Returns coded{ code = R_OK, value = entries posted to the outbox }.
-- Safe to run twice: the second finds every field ended and the dependent settled.
local now = now_ms()
local P = dep_prefix(jobs)
local g = P .. 'dg:' .. id
if registered then redis.call('ZREM', dreg, id) end
local raw = redis.call('HGET', jobs, id)
local at = raw and has(string.byte(raw, 2), F_EXTRA) and rec_extra(raw, X_DEPS)
if not at then return coded{ code = R_OK, value = 0 } end
local policy, results = string.byte(raw, at), string.byte(raw, at + 1) == 1
for i = 1, ends_n do
  local field, how, result = ends_field[i], ends_how[i], ends_result[i]
  if redis.call('HGET', g, field) == 'p' then
    redis.call('HSET', g, field, how)
    redis.call('HINCRBY', g, '\0n', -1)
    -- A result is kept while the dependent's results fit MAX_DEP_RESULT_BYTES (`\0rb`).
    if results and result ~= '' then
      if redis.call('HINCRBY', g, '\0rb', #result) <= MAX_DEP_RESULT_BYTES then
        redis.call('HSET', g, '\0r' .. field, result)
      else
        redis.call('HINCRBY', g, '\0rb', -#result)
      end
    end
    if how ~= 'o' then redis.call('HSETNX', g, '\0x', field .. '\0' .. how) end
  end
end
if not redis.call('ZSCORE', waiting, id) then return coded{ code = R_OK, value = 0 } end
local s = redis.call('HMGET', g, '\0n', '\0x')
local pending, failed = tonumber(s[1]) or 0, s[2]
local ending = nil
if failed and policy == DEP_DEAD then
  local q, dep, how = string.match(failed, '^([^%z]*)%z([^%z]*)%z(.)$')
  local r = decode(raw)
  r.err = 'dependency ' .. q .. '/' .. dep .. ' ' .. (how == 'd' and 'dead' or 'cancelled')
  redis.call('ZREM', waiting, id)
  bury(jobs, dead, id, r, now)
  count(stat, now, 3, 1)
  ending = 'd'
elseif failed and policy == DEP_CANCEL then
  redis.call('ZREM', waiting, id)
  redis.call('HDEL', jobs, id)
  ending = 'c'
elseif pending <= 0 then
  redis.call('ZREM', waiting, id)
  local due = math.max(rec_due(raw), now)
  if due ~= rec_due(raw) then
    local r = decode(raw)
    r.due = due
    redis.call('HSET', jobs, id, encode(r))
  end
  wake_if_earlier(sched, wake, due)
  redis.call('ZADD', sched, due, id)
end
local posted = 0
if ending then
  local lflags = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
  if bit.band(lflags, L_BATCH) ~= 0 then
    --@ define batch_end batch_count
    local bacc = {}
    batch_end(bacc, raw, id, ending)
    batch_count(bm, bacc, now)
  end
  local dacc = {}
  dep_end(dacc, raw, id, ending)
  posted = dep_post(jobs, dacc, now)
end
return coded{ code = R_OK, value = posted }
