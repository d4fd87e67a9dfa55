-- dep_watch.lua: registers a dependent as a waiter of dependencies in this shard, or says how
-- each already ended (deps.lua, at the top).
-- Keys (declared in transitions/dep_watch.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- jobs      HASH id -> record
-- dead      ZSET id -> failed_at ms
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- ix        (tail; a queue with a lane only) each dependency's index bucket `ix:<b>`, in order
-- Arguments: the tail `watch` of (id, waiter, mode): the dependency, the waiter's field
-- (`<its key prefix>\0<its id>`) and `r` when it wants the result (else `1`).
-- Returns per dependency, in order, push_dep_state(how, result): `p` (pending: the waiter is
-- registered in `dw:<id>` and the job marked X_WATCHED), `o` (done or gone: ended well;
-- result: a done job's kept result when asked, else ''), `d` (dead).
-- A lane job moves to `jobs` and `sched` first (lane.lua: lane_pull), so its record can carry
-- the mark.
-- Safe to run twice: the waiter is set again (a hash field), the mark found.
local out = {}
for i = 1, watch_n do
  local id, waiter, mode = watch_id[i], watch_waiter[i], watch_mode[i]
  local raw = redis.call('HGET', jobs, id)
  if not raw and ix_n > 0 then
    --@ define lane_pull
    if lane_pull({ lane = lane, meta = lanemeta, gone = lanegone, ix = KEYS[ix_at + i - 1] },
      jobs, sched, id) then
      raw = redis.call('HGET', jobs, id)
    end
  end
  if not raw then
    push_dep_state(out, 'o', '')
  elseif has(string.byte(raw, 2), F_DONE) then
    local result = ''
    if mode == 'r' then result = decode(raw).result or '' end
    push_dep_state(out, 'o', result)
  elseif redis.call('ZSCORE', dead, id) then
    push_dep_state(out, 'd', '')
  else
    redis.call('HSET', dep_prefix(jobs) .. 'dw:' .. id, waiter, mode)
    if not (has(string.byte(raw, 2), F_EXTRA) and rec_extra(raw, X_WATCHED)) then
      local r = decode(raw)
      r.sized = r.sized or {}
      r.sized[#r.sized + 1] = struct.pack('>BH', X_WATCHED, 0)
      redis.call('HSET', jobs, id, encode(r))
    end
    push_dep_state(out, 'p', '')
  end
end
return out
