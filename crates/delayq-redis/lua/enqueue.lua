-- enqueue.lua: adds jobs that do not exist yet; reports existing ids without touching them.
-- KEYS[1] sched  ZSET id -> due_ms
-- KEYS[2] jobs   HASH id -> record
-- KEYS[3] wake   channel of the queue's consumers
-- KEYS[4] stat   STRING paused flag and series of counts (common.lua: count)
-- KEYS[5] ready  ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
--                (a job with a priority marks the queue: L_PRIO)
-- ARGV[1] number of jobs n; then 6 per job:
--   id, mode ('n'|'d'|'a'; in capitals: replace an existing scheduled job), t_ms,
--   max_attempts, flags, tail
--   (tail: the record after its fixed header — optional sections and payload — built by
--   the client; flags say which optional sections it holds)
-- Returns a flat array, 2 per job in order: R_OK (created) | R_EXISTS (nothing written) |
--   R_REPLACED (a scheduled job replaced: new payload, due time and options, created now; it
--   keeps its attempts) | R_DONE (done and kept, within its dedupe window: nothing written; past
--   the window the id is free and the job is created) | R_LEASED / R_DEAD (replace refused: the job is there), due_ms
--   (the job's due time after the call). An id twice in one batch: the first is written.
-- Safe to run twice: ids are written with HSETNX, so a second run finds every job of the
-- first and answers R_EXISTS with the stored due time (and counts nothing: only created jobs
-- are counted); a replace run twice writes the same record twice (a relative due time moves
-- by the time between the runs, as a second debounce would).
-- A full store (`maxmemory`, noeviction) refuses the first write of a script: HSETNX is
-- called with pcall so an id that exists still answers R_EXISTS (nothing to write); a new
-- id returns the OOM error, and nothing was written (later writes of a script that has
-- written once are never refused).
local sched, jobs, wake, stat, ready = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now = now_ms()
local n = tonumber(ARGV[1])
local out = {}
local earliest = nil
local zadd = {}
local fresh = {}
local created = 0
local prio = false
for i = 0, n - 1 do
  local a = 2 + i * 6
  local id = ARGV[a]
  local due = fresh[id]
  if due == nil then
    due = due_from(ARGV[a + 1], tonumber(ARGV[a + 2]), now)
    local flags = tonumber(ARGV[a + 4])
    local rec = struct.pack(HEADER, RECORD_VERSION, flags, 0, tonumber(ARGV[a + 3]), due, now, 0)
      .. ARGV[a + 5]
    local set, stored = redis.pcall('HSETNX', jobs, id, rec), nil
    if type(set) == 'table' then
      stored = redis.call('HGET', jobs, id)
      if not stored then return set end
    end
    if set == 0 then
      stored = redis.call('HGET', jobs, id)
      if has(string.byte(stored, 2), F_DONE) and decode(stored).dedupe_until <= now then
        -- A job kept as done whose dedupe window is over: the id is free again (its entry in
        -- the done index is left for trimming, which skips records that are not done).
        redis.call('HSET', jobs, id, rec)
        set = 1
      end
    end
    if set == 1 then
      if not prio and bit.band(flags, F_EXTRA) ~= 0 then
        prio = tail_priority(flags, ARGV[a + 5]) ~= nil
      end
      zadd[#zadd + 1] = due
      zadd[#zadd + 1] = id
      fresh[id] = due
      created = created + 1
      if earliest == nil or due < earliest then earliest = due end
      out[#out + 1] = R_OK
    else
      if has(string.byte(stored, 2), F_DONE) then
        -- Done within its dedupe window: refused, the original outcome answered.
        due = rec_due(stored)
        out[#out + 1] = R_DONE
      elseif string.byte(ARGV[a + 1]) < 97 then
        -- Replace (mode in capitals): only a scheduled job.
        if redis.call('ZSCORE', sched, id) or redis.call('ZREM', ready, id) == 1 then
          if not prio and has(tonumber(ARGV[a + 4]), F_EXTRA) then
            prio = tail_priority(tonumber(ARGV[a + 4]), ARGV[a + 5]) ~= nil
          end
          wake_if_earlier(sched, wake, due)
          redis.call('HSET', jobs, id, struct.pack(HEADER, RECORD_VERSION, tonumber(ARGV[a + 4]),
            rec_attempt(stored), tonumber(ARGV[a + 3]), due, now, 0) .. ARGV[a + 5])
          redis.call('ZADD', sched, due, id)
          out[#out + 1] = R_REPLACED
        else
          -- Not scheduled: leased exactly while its record carries a token, else dead.
          due = rec_due(stored)
          out[#out + 1] = rec_token(stored) ~= 0 and R_LEASED or R_DEAD
        end
      else
        due = rec_due(stored)
        out[#out + 1] = R_EXISTS
      end
    end
  else
    out[#out + 1] = R_EXISTS
  end
  out[#out + 1] = due
end
if prio then
  local f = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
  if bit.band(f, L_PRIO) == 0 then
    redis.call('BITFIELD', stat, 'SET', 'u8', S_FLAGS * 8, f + L_PRIO)
  end
end
if earliest ~= nil then
  wake_if_earlier(sched, wake, earliest)
  call_chunked('ZADD', sched, zadd)
  count(stat, now, 0, created)
end
return out
