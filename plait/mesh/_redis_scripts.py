"""The Lua scripts of the Redis mesh; each runs atomically on the server.

Key layout under the mesh prefix ``P``:

- ``P kv:KEY``  hash ``{v: encoded value, n: version}``, and ``t: 1`` if the value is
  tainted (no field otherwise)
- ``P keys``    sorted set, score 0, one member per existing KEY (the scan index)
- ``P t:TOPIC`` stream; entry fields ``id kind data at``, and ``t 1`` for a tainted event
- ``P sched``   sorted set of scheduled events, score = due time in server microseconds,
  member ``k:KEY`` for a keyed event, ``e:EVENT_ID`` for an unkeyed one
- ``P schedp``  hash member -> cmsgpack ``[stream key, id, kind, data, at]``, with a
  sixth element ``1`` for a tainted event

Taint costs an untainted write nothing on the wire: a tainted put or publish has an op
code of its own (``Q``, ``F``) with the same fields as the untainted one (``P``, ``E``).

Scripts read the server clock (``TIME``), so hosts with skewed clocks agree on when a
scheduled event is due; Redis 7 replicates script effects, which makes that safe.
"""

from __future__ import annotations

COMMIT = """
-- KEYS[1] index, KEYS[2] sched, KEYS[3] schedp, KEYS[3 + i] the key of op i
-- ARGV[1] one msgpack array (one argument to encode, not dozens): the op count, then
-- per op a code and its fields:
--   P name data if_version | D name if_version | C schedule_key
--   A group entry_id consumer   (ack: only while that consumer holds the entry)
--   H group entry_id consumer   (hold: fail unless that consumer holds the entry)
--   Q name data if_version  (a put of a tainted value)
--   T group consumer   (take: the group's next new entry, for that consumer)
--   K name version     (check: fail unless the key is at that version; writes nothing)
--   I name data tainted   (insert: create the key at version 1 unless it exists)
--   E event_id kind data at after_ms schedule_key   (if_version and schedule_key may be '')
--   F event_id kind data at after_ms schedule_key   (a tainted event)
local index, sched, payloads = KEYS[1], KEYS[2], KEYS[3]
local ARG = cmsgpack.unpack(ARGV[1])
local ops, a = {}, 2
for i = 1, tonumber(ARG[1]) do
  local code = ARG[a]
  local op = {code = code, key = KEYS[3 + i]}
  if code == 'P' or code == 'Q' then
    op.name, op.data, op.ifv = ARG[a + 1], ARG[a + 2], ARG[a + 3]
    a = a + 4
  elseif code == 'D' then
    op.name, op.ifv = ARG[a + 1], ARG[a + 2]
    a = a + 3
  elseif code == 'E' or code == 'F' then
    op.id, op.kind, op.data, op.at = ARG[a + 1], ARG[a + 2], ARG[a + 3], ARG[a + 4]
    op.after, op.skey = tonumber(ARG[a + 5]), ARG[a + 6]
    a = a + 7
  elseif code == 'C' then
    op.skey = ARG[a + 1]
    a = a + 2
  elseif code == 'T' then
    op.group, op.consumer = ARG[a + 1], ARG[a + 2]
    a = a + 3
  elseif code == 'K' then
    op.name, op.ifv = ARG[a + 1], ARG[a + 2]
    a = a + 3
  elseif code == 'I' then
    op.name, op.data, op.tainted = ARG[a + 1], ARG[a + 2], ARG[a + 3]
    a = a + 4
  else
    op.group, op.entry, op.consumer = ARG[a + 1], ARG[a + 2], ARG[a + 3]
    a = a + 4
  end
  ops[i] = op
end

local function holds(op)
  local p = redis.pcall('XPENDING', op.key, op.group, op.entry, op.entry, 1)
  return type(p) == 'table' and p.err == nil and p[1] ~= nil and p[1][2] == op.consumer
end

-- every expectation first, against the state as the batch itself would see it
local shadow = {}
for i, op in ipairs(ops) do
  if op.code == 'H' then
    if not holds(op) then return {'lost', i} end
  elseif op.code == 'P' or op.code == 'Q' or op.code == 'D' or op.code == 'K' then
    local current = shadow[op.key]
    if current == nil then
      current = tonumber(redis.call('HGET', op.key, 'n')) or 0
    end
    if op.ifv ~= '' and tonumber(op.ifv) ~= current then
      return {'conflict', op.name, tonumber(op.ifv), current}
    end
    if op.code == 'P' or op.code == 'Q' then shadow[op.key] = current + 1
    elseif op.code == 'D' then shadow[op.key] = 0 end
  elseif op.code == 'I' then
    local current = shadow[op.key]
    if current == nil then current = tonumber(redis.call('HGET', op.key, 'n')) or 0 end
    if current == 0 then shadow[op.key] = 1 else shadow[op.key] = current end
  end
end

local out, now = {}, nil
for i, op in ipairs(ops) do
  local result = 0
  if op.code == 'P' or op.code == 'Q' then
    result = redis.call('HINCRBY', op.key, 'n', 1)
    if op.code == 'Q' then
      redis.call('HSET', op.key, 'v', op.data, 't', 1)
    else
      redis.call('HSET', op.key, 'v', op.data)
      if result > 1 then redis.call('HDEL', op.key, 't') end  -- an earlier taint goes
    end
    if result == 1 then redis.call('ZADD', index, 0, op.name) end
  elseif op.code == 'D' then
    result = redis.call('DEL', op.key)
    if result == 1 then redis.call('ZREM', index, op.name) end
  elseif op.code == 'E' or op.code == 'F' then
    if op.after == 0 and op.skey == '' then
      if op.code == 'F' then
        redis.call('XADD', op.key, '*', 'id', op.id, 'kind', op.kind, 'data', op.data,
                   'at', op.at, 't', 1)
      else
        redis.call('XADD', op.key, '*', 'id', op.id, 'kind', op.kind, 'data', op.data,
                   'at', op.at)
      end
    else
      if now == nil then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000000 + tonumber(t[2])
      end
      local member = 'e:' .. op.id
      if op.skey ~= '' then member = 'k:' .. op.skey end
      redis.call('ZADD', sched, now + op.after * 1000, member)
      local packed = {op.key, op.id, op.kind, op.data, op.at}
      if op.code == 'F' then packed[6] = 1 end
      redis.call('HSET', payloads, member, cmsgpack.pack(packed))
    end
  elseif op.code == 'C' then
    redis.call('ZREM', sched, 'k:' .. op.skey)
    redis.call('HDEL', payloads, 'k:' .. op.skey)
  elseif op.code == 'K' or op.code == 'H' then
    result = 0
  elseif op.code == 'I' then
    if redis.call('EXISTS', op.key) == 0 then
      redis.call('HSET', op.key, 'v', op.data, 'n', 1)
      if op.tainted == 1 then redis.call('HSET', op.key, 't', 1) end
      redis.call('ZADD', index, 0, op.name)
      result = 1
    end
  elseif op.code == 'T' then
    local read = redis.pcall('XREADGROUP', 'GROUP', op.group, op.consumer, 'COUNT', 1,
                             'STREAMS', op.key, '>')
    if type(read) == 'table' and read.err == nil and read[1] then
      result = read[1][2][1]
    end
  elseif holds(op) then
    result = redis.call('XACK', op.key, op.group, op.entry)
  end
  out[i] = result
end
return {'ok', out}
"""
"""Apply a batch of puts, deletes, publishes, cancels and acks, all or none.

Returns ``{'ok', results}`` (a put's new version, a delete's 1/0 existed, a take's
``{entry id, fields}`` or 0) or
``{'conflict', key, expected, actual}`` having written nothing.
"""

POLL = """
-- KEYS[1] sched, KEYS[2] schedp, KEYS[2 + i] the subscription's streams
-- ARGV[1] group, ARGV[2] consumer, ARGV[3] visibility ms, ARGV[4] rotation,
-- ARGV[5] how many entries to take at most, ARGV[5 + i] the XAUTOCLAIM cursor of stream i
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 512)
for _, member in ipairs(due) do
  local packed = redis.call('HGET', KEYS[2], member)
  redis.call('ZREM', KEYS[1], member)
  redis.call('HDEL', KEYS[2], member)
  if packed then
    local e = cmsgpack.unpack(packed)
    if e[6] == 1 then
      redis.call('XADD', e[1], '*', 'id', e[2], 'kind', e[3], 'data', e[4], 'at', e[5], 't', 1)
    else
      redis.call('XADD', e[1], '*', 'id', e[2], 'kind', e[3], 'data', e[4], 'at', e[5])
    end
  end
end
local wait = -1
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if nxt[2] then wait = math.max(0, tonumber(nxt[2]) - now) end

local n = #KEYS - 2
local want = tonumber(ARGV[5])
local cursors, hits = {}, {}
for i = 1, n do cursors[i] = ARGV[5 + i] end
local rotation = tonumber(ARGV[4])
for j = 0, n - 1 do
  local i = (rotation + j) % n + 1
  local claimed = redis.call('XAUTOCLAIM', KEYS[2 + i], ARGV[1], ARGV[2], ARGV[3], cursors[i],
                             'COUNT', 1)
  cursors[i] = claimed[1]
  local entry = claimed[2][1]
  if entry then
    local pending = redis.call('XPENDING', KEYS[2 + i], ARGV[1], entry[1], entry[1], 1)
    hits[#hits + 1] = {i, entry[1], pending[1][4], entry[2]}
    break
  end
end
for j = 0, n - 1 do
  if #hits >= want then break end
  local i = (rotation + j) % n + 1
  local read = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', want - #hits,
                          'STREAMS', KEYS[2 + i], '>')
  if read then
    for _, entry in ipairs(read[1][2]) do
      hits[#hits + 1] = {i, entry[1], 1, entry[2]}
    end
  end
end
local drained = 0
if #hits < want then drained = 1 end
return {wait, hits, cursors, drained}
"""
"""Promote due scheduled events, then claim or read up to ARGV[5] entries for a consumer.

Returns ``{wait_us, hits, cursors, drained}``: ``wait_us`` until the next scheduled
event (-1 if none); ``hits`` a list of ``{stream index, entry id, attempt, fields}``;
``drained`` 1 when fewer than asked were found (the group has nothing more for now, so
the subscription may block on its new entries), else 0.
"""

CREATE_GROUPS = """
-- KEYS the streams; ARGV[1] group, ARGV[2] start id ('$' or '0')
for _, key in ipairs(KEYS) do
  local r = redis.pcall('XGROUP', 'CREATE', key, ARGV[1], ARGV[2], 'MKSTREAM')
  if type(r) == 'table' and r.err and not string.find(r.err, 'BUSYGROUP', 1, true) then
    return redis.error_reply(r.err)
  end
end
return 1
"""
"""Create a consumer group on every stream that lacks it (an existing group keeps its place)."""

SCAN_PAGE = """
-- KEYS[1] index; ARGV[1] min, ARGV[2] max, ARGV[3] page size, ARGV[4] kv key prefix,
-- ARGV[5] 'r' to read in descending order
local names
if ARGV[5] == 'r' then
  names = redis.call('ZREVRANGEBYLEX', KEYS[1], ARGV[2], ARGV[1], 'LIMIT', 0, ARGV[3])
else
  names = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', 0, ARGV[3])
end
local out = {#names, names[#names] or ''}
for _, name in ipairs(names) do
  local found = redis.call('HMGET', ARGV[4] .. name, 'v', 'n', 't')
  if found[1] then
    out[#out + 1] = name
    out[#out + 1] = found[1]
    out[#out + 1] = found[2]
    out[#out + 1] = found[3] and 1 or 0
  end
end
return out
"""
"""One page of the scan index with each key's value and version, read atomically.

Returns ``{count, last name, name, value, version, tainted (0 or 1), ...}``.
"""

DELETE_RANGE = """
-- KEYS[1] index; ARGV[1] min, ARGV[2] max (lex range), ARGV[3] kv key prefix
local names = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2])
for i = 1, #names, 512 do
  local batch = {}
  for j = i, math.min(i + 511, #names) do batch[#batch + 1] = ARGV[3] .. names[j] end
  redis.call('DEL', unpack(batch))
end
redis.call('ZREMRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2])
return #names
"""
"""Delete every key whose name is in a lex range of the index, atomically; how many."""

__all__ = ["COMMIT", "CREATE_GROUPS", "DELETE_RANGE", "EXTEND", "POLL", "SCAN_PAGE", "TRIM"]

TRIM = """
-- KEYS the streams. For each with at least one group: drop the entries every group has
-- passed (its last-delivered id) and acked (below its smallest pending id).
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function less(a, b)
  local am, as = parse(a)
  local bm, bs = parse(b)
  return am < bm or (am == bm and as < bs)
end
local removed = 0
for _, key in ipairs(KEYS) do
  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', key)
  if ok and #groups > 0 then
    local floor = nil
    for _, g in ipairs(groups) do
      local info = {}
      for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
      local keep
      if tonumber(info['pending']) > 0 then
        keep = redis.call('XPENDING', key, info['name'])[2]
      else
        local ms, seq = parse(info['last-delivered-id'])
        keep = ms .. '-' .. (seq + 1)
      end
      if floor == nil or less(keep, floor) then floor = keep end
    end
    removed = removed + redis.call('XTRIM', key, 'MINID', floor)
  end
end
return removed
"""
"""Trim streams to what some group still needs; returns how many entries went."""

EXTEND = """
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if p[1] and p[1][2] == ARGV[2] then
  redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
  return 1
end
return 0
"""
"""Restart an event's idle time, but only while this consumer still owns it: once
another consumer has reclaimed it, extending must not steal it back. JUSTID keeps the
delivery counter as it is. Returns 1 if it did, else 0."""
