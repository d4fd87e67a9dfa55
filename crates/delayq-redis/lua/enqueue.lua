-- enqueue.lua: adds jobs that do not exist yet; reports existing ids without touching them.
-- Keys (declared in transitions/enqueue.rs, which generates the locals):
-- sched     ZSET id -> due_ms
-- jobs      HASH id -> record
-- wake      channel of the queue's consumers
-- stat      STRING paused flag and series of counts (common.lua: count)
-- ready     ZSET id -> due_ms - priority x aging: due jobs of a queue with priorities
--           (a job with a priority marks the queue: L_PRIO)
-- done      ZSET id -> when its retention ends: completed jobs kept as done
-- lane      LIST the one-delay lane (lane.lua, above lane_entry)
-- lanemeta  HASH h (head sequence number), t (last due time), b (lanegone base)
-- lanegone  STRING bitmap of the lane's tombstones (lane.lua: lane_mark)
-- kj        STRING the key index is whole; `kj:<key>` ZSET each key's jobs (keyed.lua, above
--           key_index_add): a keyed job written is added there
-- ix        (tail; a queue with a lane only) the index bucket `ix:<b>` of each job, in order
-- Arguments: the tail `batch` of (id, spec): the spec is the whole record as the client builds
--   it (record.rs `spec`) after one byte of flags — when (SPEC_NOW | SPEC_DELAY | SPEC_AT),
--   plus SPEC_REPLACE to replace an existing scheduled job — with its due field holding the
--   schedule's time (a delay or an absolute ms; 0 for SPEC_NOW) and created 0: the script
--   writes both from its clock (two arguments per job: a batch's cost in Redis is mostly per
--   argument and per call)
-- Returns a list of (code, due_ms) per job in order (push_enqueued): R_OK (created) | R_EXISTS (nothing written) |
--   R_REPLACED (a scheduled job replaced: new payload, due time and options, created now; it
--   keeps its attempts) | R_DONE (done and kept, within its dedupe window: nothing written; past
--   the window the id is free and the job is created) | R_LEASED / R_DEAD (replace refused: the job is there), and the
--   job's due time after the call. An id twice in one batch: the first is written.
-- A batch reads every id with one HMGET and writes the new records with one HSET (chunked); a
-- single job uses HSETNX, one command fewer.
-- The lane (bucket keys given and the queue's L_LANE flag set): a new job without a priority
-- or a key (a keyed job is found through its key's index, which holds ids in `jobs`) whose
-- due time is not earlier than the lane's last goes to the lane (RPUSH, its index
-- entry); with time windows (the u16 at S_WIDTH of `stat`), one due in a window that starts
-- more than a width from now and is not full goes to that window (lane.lua: win_key; its
-- index entry, and a window's length and push, once a window a call; the windows' count once
-- a call; a new window is added to `<lane>:w`, with a wake-up when it is the first); any
-- other to `jobs` and `sched`. A replace first moves a lane job out (lane_pull).
-- Safe to run twice: a second run finds every job of the first (HMGET / HSETNX / the lane's
-- index) and answers
-- R_EXISTS with the stored due time (and counts nothing: only created jobs are counted); a
-- replace run twice writes the same record twice (a relative due time moves by the time
-- between the runs, as a second debounce would).
-- A full store (`maxmemory`, noeviction) refuses the first write of a script: the new records'
-- HSET / HSETNX is called with pcall so a batch of ids that all exist still answers R_EXISTS
-- (nothing to write); otherwise the OOM error is returned and nothing was written (later writes
-- of a script that has written once are never refused).
local now = now_ms()
local n = batch_n
local out = {}
local earliest = nil
local zadd = {}
local fresh = {}
local created = 0
local prio = false
-- A job written with a key marks the queue (L_KEYS; keyed.lua) and goes to its key's index
-- (kadd: key -> ids, keyed.lua: key_index_add).
local keyed = false
local kadd = nil
-- The lane, when this queue has one (lane.lua: lane_find); L.ix is set per job.
local L = nil
-- The lane's length and next sequence number when the script began, its last due time, the
-- entries to push and the first one's due time.
local lane_len, lane_next, lane_tail, lane_push, lane_first = 0, 0, nil, {}, nil
-- The window width (0: none), each window's length as pushed so far, its entries to push
-- and the windows in the order first pushed to.
local W, wlen, wpush, worder = 0, {}, {}, {}
if ix_n > 0 then
  -- The lane's helpers, defined only for a queue with a lane (scripts.rs: DEFINE).
  --@ define win_member win_key wins_key win_width lane_find lane_pull lane_first_due
  local fw = redis.call('GETRANGE', stat, S_FLAGS, S_WIDTH + 1)
  local f = string.byte(fw) or 0
  if bit.band(f, L_LANE) ~= 0 then
    W = win_width(fw, S_FLAGS)
    L = { lane = lane, meta = lanemeta, gone = lanegone }
    for i = 1, n do
      if string.byte(batch_spec[i], 1) >= SPEC_REPLACE then
        L.ix = KEYS[ix_at + i - 1]
        lane_pull(L, jobs, sched, batch_id[i])
      end
    end
    lane_len = redis.call('LLEN', L.lane)
    local m = redis.call('HMGET', L.meta, 'h', 't')
    lane_next = tonumber(m[1] or 0) + lane_len
    if lane_len > 0 then lane_tail = tonumber(m[2]) end
  end
end
-- The stored records of a batch (false: none), read at once.
local stored_all = nil
if n > 1 or L then
  local ids = batch_id
  stored_all = {}
  for i = 1, n, 2000 do
    local got = redis.call('HMGET', jobs, unpack(ids, i, math.min(i + 1999, n)))
    for j = 1, #got do stored_all[i + j - 1] = got[j] end
  end
end
local new = {}
for i = 0, n - 1 do
  local id, spec = batch_id[i + 1], batch_spec[i + 1]
  local due = fresh[id]
  if due == nil then
    local mode = string.byte(spec, 1)
    -- SPEC_REPLACE is the flags byte's highest bit (record.rs).
    local replace = mode >= SPEC_REPLACE
    due = due_from(mode, struct.unpack('>I6', spec, 1 + AT_DUE), now)
    local rec = string.sub(spec, 2, AT_DUE) .. struct.pack('>I6I6', due, now)
      .. string.sub(spec, 1 + AT_TOKEN)
    local set, stored = 0, nil
    local in_lane = nil
    if stored_all then
      stored = stored_all[i + 1]
      if not stored and L and not replace and #id <= 255 then
        L.ix = KEYS[ix_at + i]
        local plain = true
        if has(string.byte(rec, 2), F_EXTRA) then
          local k = rec_kp(rec)
          plain = k == '' and not decode(rec).prio
        end
        local fits = plain and (lane_tail == nil or due >= lane_tail)
        -- Else its window's start, when it goes to one.
        local ws = nil
        if not fits and plain and W > 0 then
          local start = due - due % W
          if start > now + W then
            if wlen[start] == nil then wlen[start] = redis.call('LLEN', win_key(L.lane, start)) end
            if wlen[start] < WIN_MAX then ws = start end
          end
        end
        -- Its index entry: the lane's sequence number, or the window's start and place.
        local val = nil
        if fits then
          val = IX_LANE .. lane_next
        elseif ws then
          val = IX_WINDOW .. struct.pack('>I6I3', ws, wlen[ws])
        end
        -- A new id takes its index entry at once (HSETNX: one call); an id the index has is
        -- looked at (lane_find), its entry replaced when it is one left behind.
        local s, lrec = nil, nil
        if not (val and redis.call('HSETNX', L.ix, id, val) == 1) then
          s, lrec = lane_find(L, id)
          if not s and val then redis.call('HSET', L.ix, id, val) end
        end
        if s then
          in_lane = rec_due(lrec)
        elseif ws then
          if not wpush[ws] then
            wpush[ws] = {}
            worder[#worder + 1] = ws
          end
          local b = tonumber(string.match(L.ix, '(%d+)$'))
          local p = wpush[ws]
          p[#p + 1] = string.char(#id) .. id .. struct.pack('>H', b) .. rec
          wlen[ws] = wlen[ws] + 1
          fresh[id] = due
          created = created + 1
          in_lane = false
        elseif fits then
          lane_push[#lane_push + 1] = string.char(#id) .. id .. rec
          lane_first = lane_first or due
          lane_next = lane_next + 1
          lane_tail = due
          fresh[id] = due
          created = created + 1
          in_lane = false
        end
      end
      if not stored and in_lane == nil then
        new[#new + 1] = id
        new[#new + 1] = rec
        set = 1
      end
    else
      set = redis.pcall('HSETNX', jobs, id, rec)
      if type(set) == 'table' then
        stored = redis.call('HGET', jobs, id)
        if not stored then return set end
        set = 0
      elseif set == 0 then
        stored = redis.call('HGET', jobs, id)
      end
    end
    local code = nil
    if in_lane ~= nil then
      -- In the lane: pushed now (false), or there already, due then.
      code = in_lane and R_EXISTS or R_OK
      if in_lane then due = in_lane end
      stored = nil
    end
    local was_done = stored and set == 0 and has(string.byte(stored, 2), F_DONE)
    if was_done and decode(stored).dedupe_until <= now then
      -- A job kept as done whose dedupe window is over: the id is free again (and no longer
      -- counted as done).
      redis.call('HSET', jobs, id, rec)
      redis.call('ZREM', done, id)
      set = 1
    end
    local written = set == 1
    if set == 1 then
      zadd[#zadd + 1] = due
      zadd[#zadd + 1] = id
      fresh[id] = due
      created = created + 1
      if earliest == nil or due < earliest then earliest = due end
      code = R_OK
    elseif was_done then
      -- Done within its dedupe window: refused, the original outcome answered.
      due = rec_due(stored)
      code = R_DONE
    elseif in_lane ~= nil then
      -- answered above
    elseif replace then
      -- Replace: only a scheduled job.
      if redis.call('ZSCORE', sched, id) or redis.call('ZREM', ready, id) == 1 then
        wake_if_earlier(sched, wake, due)
        redis.call('HSET', jobs, id, rec_claimed(rec, rec_attempt(stored), 0))
        redis.call('ZADD', sched, due, id)
        written = true
        code = R_REPLACED
      else
        -- Not scheduled: leased exactly while its record carries a token, else dead.
        due = rec_due(stored)
        code = rec_token(stored) ~= 0 and R_LEASED or R_DEAD
      end
    else
      due = rec_due(stored)
      code = R_EXISTS
    end
    if written and has(string.byte(rec, 2), F_EXTRA) then
      if not prio then prio = decode(rec).prio ~= nil end
      local k = rec_kp(rec)
      if k ~= '' then
        keyed = true
        kadd = kadd or {}
        key_index_add(kadd, k, id)
      end
    end
    push_enqueued(out, code, due)
  else
    push_enqueued(out, R_EXISTS, due)
  end
end
if #lane_push > 0 then
  if lane_len == 0 then wake_if_earlier(sched, wake, lane_first) end
  local r = redis.pcall('RPUSH', L.lane, unpack(lane_push, 1, math.min(2000, #lane_push)))
  if type(r) == 'table' and r.err then return r end
  for i = 2001, #lane_push, 2000 do
    redis.call('RPUSH', L.lane, unpack(lane_push, i, math.min(i + 1999, #lane_push)))
  end
  redis.call('HSET', L.meta, 't', lane_tail)
end
if #worder > 0 then
  local wk, total, first_new = wins_key(L.lane), 0, nil
  for _, start in ipairs(worder) do
    local p = wpush[start]
    call_chunked('RPUSH', win_key(L.lane, start), p)
    if wlen[start] == #p then
      -- A new window (one of tombstones only still has them).
      redis.call('ZADD', wk, start, win_member(start))
      if not first_new or start < first_new then first_new = start end
    end
    total = total + #p
  end
  redis.call('HINCRBY', L.meta, 'wn', total)
  if first_new and tonumber(redis.call('ZRANGE', wk, 0, 0)[1]) == first_new then
    -- A new first window: consumers come back to move it one width before it starts.
    wake_if_earlier(sched, wake, first_new - W, lane_first_due(L.lane))
  end
end
if #new > 0 then
  -- The first write of a batch without replaced or recycled ids: refused whole by a full store.
  local r = redis.pcall('HSET', jobs, unpack(new, 1, math.min(4000, #new)))
  if type(r) == 'table' and r.err then return r end
  for i = 4001, #new, 4000 do
    redis.call('HSET', jobs, unpack(new, i, math.min(i + 3999, #new)))
  end
end
if prio or keyed then
  local f = string.byte(redis.call('GETRANGE', stat, S_FLAGS, S_FLAGS)) or 0
  local add = 0
  if prio and bit.band(f, L_PRIO) == 0 then add = add + L_PRIO end
  if keyed and bit.band(f, L_KEYS) == 0 then
    -- The shard's first keyed job: its key index is whole from the start — unless the queue
    -- has a lane, which may hold keyed jobs of an earlier build (lane.lua: key_indexed).
    add = add + L_KEYS
    if not L then redis.call('SET', kj, '1') end
  end
  if add > 0 then redis.call('BITFIELD', stat, 'SET', 'u8', S_FLAGS * 8, f + add) end
end
if kadd then key_index_write(kj, kadd) end
if earliest ~= nil then
  wake_if_earlier(sched, wake, earliest, L and lane_first_due(L.lane))
  call_chunked('ZADD', sched, zadd)
end
if created > 0 then count(stat, now, 0, created) end
return out
