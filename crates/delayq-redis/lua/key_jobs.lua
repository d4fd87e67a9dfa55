-- key_jobs.lua: one page of a key's jobs in this shard, by id, through the key index
-- (keyed.lua, above key_index_add).
-- Keys (declared in transitions/key_jobs.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- lease     ZSET id -> lease deadline ms
-- dead      ZSET id -> failed_at ms
-- jobs      HASH id -> record
-- ready     ZSET a keyed queue's due jobs in turns (keyed.lua)
-- stat      STRING (the flags: L_KEYS)
-- lane      LIST the one-delay lane (lane.lua, above lane_entry; key_indexed only)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- kj        STRING: the index is whole; `kj:<key>` ZSET (all scores 0) the key's jobs
-- Arguments: key, after (the page starts strictly after this id; '' from the first), n (the
-- page's size), which (0: every state but done | LIST_SCHEDULED | LIST_DUE | LIST_LEASED |
-- LIST_DEAD), scan (most index members read in this call).
-- Returns key_page{ jobs, stopped }: jobs (push_key_job: id, state, at, rec) — at most n + 1
-- matching jobs (one more than the page says that a next page exists), `at` the lease deadline
-- or failed-at time (-1 for the other states); stopped: '' or, when the call read `scan`
-- members without finding n + 1, the last id it read (it knows nothing past it); now: the
-- clock it read (ms).
-- Members whose job is gone, done or under another key are dropped (the index's only
-- cleanup; key_indexed may build the index first).
-- Safe to run twice: it writes only the index's cleanup and its one-time build, which a
-- second run finds done.
key_indexed({ kj = kj, stat = stat, lane = lane, lanemeta = lanemeta, lanegone = lanegone,
  jobs = jobs, sched = sched, ready = ready, lease = lease, dead = dead })
local now = now_ms()
local ixk = kj .. ':' .. key
local lo = after == '' and '-' or '(' .. after
local out, found, stale, last, read, ended = {}, 0, {}, nil, 0, false
while found <= n and read < scan do
  local want = math.min(500, scan - read)
  local ids = redis.call('ZRANGE', ixk, lo, '+', 'BYLEX', 'LIMIT', 0, want)
  read = read + #ids
  if #ids > 0 then
    last = ids[#ids]
    lo = '(' .. last
    local raws = redis.call('HMGET', jobs, unpack(ids))
    for i = 1, #ids do
      local id, raw = ids[i], raws[i]
      if not key_member(raw, key) then
        stale[#stale + 1] = id
      elseif found <= n then
        local st, at, listed = ST_SCHEDULED, -1, LIST_SCHEDULED
        local d = redis.call('ZSCORE', lease, id)
        if d then
          st, at, listed = ST_LEASED, tonumber(d), LIST_LEASED
        else
          d = redis.call('ZSCORE', dead, id)
          if d then
            st, at, listed = ST_DEAD, tonumber(d), LIST_DEAD
          elseif rec_due(raw) <= now then
            listed = LIST_DUE
          end
        end
        if which == 0 or which == listed then
          push_key_job(out, id, st, at, raw)
          found = found + 1
        end
      end
    end
  end
  if #ids < want then
    ended = true
    break
  end
end
if #stale > 0 then call_chunked('ZREM', ixk, stale) end
local stopped = ''
if not ended and found <= n and last then stopped = last end
return key_page{ jobs = out, stopped = stopped, now = now }
