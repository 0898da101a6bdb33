"""The Lua scripts behind the Redis store: each one is atomic on the server, so leases, the
global budget and the solver lease hold across any number of workers.

Stored request entries (``req`` hash) are ``"<LANE>|<score>|<slot>|<json>"``: the lane (``E``
for ECHO's own requests, ``P`` for the spider's plain ones), the queue score and the download
slot (the host, or ``meta["download_slot"]``) travel with the request, so an expired lease can
put it back where it was and the fleet's politeness knows whose turn it is. Entries of the
first format, ``"<lane>|<score>|<json>"`` (lower-case lane, no slot), are still read.

Fleet politeness (``owners``, ``host_next``, ``host_delay``): a download slot is leased to one
worker at a time, so that worker's downloader keeps the slot's delay, concurrency and
AutoThrottle's adjustments for the whole fleet. The owner is ``"<token>|<until ms>|<held>"``:
it holds the slot while it holds leases of its requests (renewals extend ``until``) and for
the slot's delay after its last one is acked (its request was sent before), so a second
worker's first request never comes closer than the delay to the first one's last. Requests
of a slot another worker owns stay queued for the next round. ``host_next`` paces leases: a
slot's request is leased only when its turn (the last lease plus the slot's delay, from
``host_delay`` as the workers' downloaders report it, or the default) comes within the
horizon, so a worker's buffer never fills with a slow host's requests. A lease is the member
``"<request id>|<lease number>"`` of the ``leases`` sorted set, scored by its expiry (ms):
acknowledging an old lease after it expired and went to another worker does nothing.
Request ids start with ``s:`` (a source), ``p:`` (a page), ``r:`` (a filtered plain request)
or ``u:`` (``dont_filter``); pages and filtered requests are remembered in ``done`` for the
dupefilter's time to live. Each lease of a request id counts in ``attempts`` until it is
acked; past ``ECHO_REDIS_MAX_ATTEMPTS`` the request goes to ``dead`` rather than round the
fleet for ever (one that crashes every worker taking it).
"""

NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# Helpers for scripts that read what anyone with write access could have stored: they check
# every value they parse, so no stored content can make a script fail half-way (inside the
# worker's MULTI, an error would still commit the rest of the transaction).
CHECKED = """
local function finite(x)
  if x and x == x and x ~= math.huge and x ~= -math.huge then return x end
  return nil
end
local function bump(key, field, by)
  local n = redis.pcall('HINCRBY', key, field, by)
  if type(n) ~= 'number' then  -- not an integer there: count from here
    redis.call('HSET', key, field, by)
    n = by
  end
  return n
end
local function entry(stored)  -- lane, score, payload and slot of a stored request, or nil
  if type(stored) ~= 'string' then return nil end
  local lane, score, slot, payload = string.match(stored, '^([EP])|([^|]*)|([^|]*)|(.*)$')
  if lane then
    lane = string.lower(lane)
  else
    slot = ''
    lane, score, payload = string.match(stored, '^([ep])|([^|]*)|(.*)$')
  end
  score = finite(tonumber(score))
  if not score then return nil end
  return lane, score, payload, slot
end
"""

# Helpers for fleet politeness; KEYS owners, host_delay by name (set before use).
HOSTS = """
local function owner_of(owners, slot)  -- token, until (ms), leases held; or nil
  local held = redis.call('HGET', owners, slot)
  if type(held) ~= 'string' then return nil, 0, 0 end
  local token, untl, count = string.match(held, '^(.*)|([^|]*)|([^|]*)$')
  if not token then return nil, 0, 0 end
  return token, finite(tonumber(untl)) or 0, finite(tonumber(count)) or 0
end
local function slot_delay_ms(delays, slot, default_ms)
  local d = finite(tonumber(redis.call('HGET', delays, slot)))
  if d and d >= 0 then return d * 1000 end
  return default_ms
end
"""

# KEYS: queue, plainq, req, leases, budget, served, counters, attempts, dead, owners,
#       host_next, host_delay
# ARGV: want, lease_ms, rate (requests/s, 0: no limit), burst (requests), plain_share,
#       max_attempts, token (the worker's; '' leaves fleet politeness out), default delay
#       (ms), horizon (ms: how far ahead a slot's turn may be to lease its request now)
# Returns {{member, payload, ...}, {dead request ids}, malformed entries removed}. A request
# leased more than max_attempts times (its workers died or never reported it) moves to
# ``dead`` instead; a stored entry that is not a request entry is removed. Each lane is
# scanned in queue order up to SCAN entries: a request whose slot is another worker's, or not
# due yet, keeps its place for a later round.
LEASE = (
    NOW
    + CHECKED
    + HOSTS
    + """
local SCAN = 1000
local malformed = 0
local function drop(rid)
  redis.call('HDEL', KEYS[3], rid)
  redis.call('HDEL', KEYS[8], rid)
  malformed = malformed + 1
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 500)
for _, member in ipairs(expired) do
  redis.call('ZREM', KEYS[4], member)
  local rid = string.match(member, '^(.*)|[^|]*$')
  local stored = rid and redis.call('HGET', KEYS[3], rid)
  if not rid then
    malformed = malformed + 1
  elseif stored then
    local lane, score = entry(stored)
    if lane then
      redis.call('ZADD', lane == 'p' and KEYS[2] or KEYS[1], score, rid)
      bump(KEYS[7], 'reclaimed', 1)
    else
      drop(rid)
    end
  end
end
local want = tonumber(ARGV[1])
local lease_ms = tonumber(ARGV[2])
local rate = tonumber(ARGV[3])
local max_attempts = tonumber(ARGV[6])
local me = ARGV[7]
local default_ms = tonumber(ARGV[8])
local horizon = tonumber(ARGV[9])
local function slot_free(slot)
  if me == '' or slot == '' then return true end
  local token, untl = owner_of(KEYS[10], slot)
  if token and token ~= me and untl > now then return false end
  local turn = finite(tonumber(redis.call('HGET', KEYS[11], slot))) or 0
  return turn <= now + horizon
end
local function take_slot(slot)
  if me == '' or slot == '' then return end
  local token, untl, count = owner_of(KEYS[10], slot)
  if token ~= me or untl <= now then count = 0 end  -- a new tenure
  untl = math.max(untl, now + lease_ms)
  redis.call('HSET', KEYS[10], slot, me .. '|' .. untl .. '|' .. (count + 1))
  local turn = finite(tonumber(redis.call('HGET', KEYS[11], slot))) or 0
  local gap = slot_delay_ms(KEYS[12], slot, default_ms)
  redis.call('HSET', KEYS[11], slot, math.max(turn, now) + gap)
end
local tokens = 0
if rate > 0 then
  local burst = tonumber(ARGV[4])
  local bucket = redis.call('HMGET', KEYS[5], 'tokens', 'ts')
  local ts = finite(tonumber(bucket[2])) or now
  local held = finite(tonumber(bucket[1])) or burst
  tokens = math.max(0, math.min(burst, held + math.max(0, now - ts) * rate / 1000))
  want = math.min(want, math.floor(tokens))
end
local share = tonumber(ARGV[5])
local served = redis.call('HMGET', KEYS[6], 'e', 'p')
local se = math.max(0, finite(tonumber(served[1])) or 0)
local sp = math.max(0, finite(tonumber(served[2])) or 0)
local out, dead = {}, {}
local n = 0
local echo_ids, plain_ids = {}, {}
if want > 0 then
  echo_ids = redis.call('ZRANGE', KEYS[1], 0, SCAN - 1)
  plain_ids = redis.call('ZRANGE', KEYS[2], 0, SCAN - 1)
end
local ei, pi = 1, 1
while n < want do
  local echo_left = ei <= #echo_ids
  local plain_left = pi <= #plain_ids
  local key, rid
  if plain_left and (sp <= share * (se + sp) or not echo_left) then
    key, rid, pi = KEYS[2], plain_ids[pi], pi + 1
  elseif echo_left then
    key, rid, ei = KEYS[1], echo_ids[ei], ei + 1
  else
    break
  end
  local stored = redis.call('HGET', KEYS[3], rid)
  local lane, payload, slot, _
  if stored then lane, _, payload, slot = entry(stored) end
  if not stored then
    redis.call('ZREM', key, rid)  -- queued without an entry: nothing to lease
  elseif not lane then
    redis.call('ZREM', key, rid)
    drop(rid)
  elseif slot_free(slot) then
    redis.call('ZREM', key, rid)
    if bump(KEYS[8], rid, 1) > max_attempts then
      redis.call('HSET', KEYS[9], rid, stored)
      redis.call('HDEL', KEYS[3], rid)
      redis.call('HDEL', KEYS[8], rid)
      table.insert(dead, rid)
    else
      local member = rid .. '|' .. bump(KEYS[7], 'lease_seq', 1)
      redis.call('ZADD', KEYS[4], now + lease_ms, member)
      take_slot(slot)
      table.insert(out, member)
      table.insert(out, payload)
      if key == KEYS[2] then sp = sp + 1 else se = se + 1 end
      n = n + 1
    end
  end
end
if rate > 0 then
  redis.call('HSET', KEYS[5], 'tokens', tostring(tokens - n), 'ts', tostring(now))
end
redis.call('HSET', KEYS[6], 'e', se, 'p', sp)
if #dead > 0 then bump(KEYS[7], 'dead', #dead) end
if malformed > 0 then bump(KEYS[7], 'malformed', malformed) end
return {out, dead, malformed}
"""
)

# KEYS: queue, plainq, req, done, solver, dead
# ARGV: token ('' for a worker's plain requests), then rid, lane, score, slot, json per
# request. Returns {added, {ids set aside in dead: not queued again}}; {-1, {}} if not the
# lease holder.
PUSH = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[5]) ~= ARGV[1] then
  return {-1, {}}
end
local added, dead = 0, {}
for i = 2, #ARGV, 5 do
  local rid, lane = ARGV[i], ARGV[i + 1]
  if redis.call('HEXISTS', KEYS[6], rid) == 1 then
    table.insert(dead, rid)
  elseif not redis.call('ZSCORE', KEYS[4], rid) and redis.call('HEXISTS', KEYS[3], rid) == 0 then
    local stored = string.upper(lane) .. '|' .. ARGV[i + 2] .. '|' .. ARGV[i + 3] .. '|'
    redis.call('HSET', KEYS[3], rid, stored .. ARGV[i + 4])
    redis.call('ZADD', lane == 'p' and KEYS[2] or KEYS[1], tonumber(ARGV[i + 2]), rid)
    added = added + 1
  end
end
return {added, dead}
"""

# KEYS: leases, req, done, counters, attempts, owners, host_delay
# ARGV: done_ttl_ms, token ('' leaves fleet politeness out), default delay (ms), then lease
# members. A worker's last lease of a slot acked, it keeps the slot for the slot's delay.
ACK = (
    NOW
    + CHECKED
    + HOSTS
    + """
local me, default_ms = ARGV[2], tonumber(ARGV[3])
local function release(slot)
  if me == '' or not slot or slot == '' then return end
  local token, untl, count = owner_of(KEYS[6], slot)
  if token ~= me then return end
  count = math.max(0, count - 1)
  if count == 0 then
    untl = math.min(untl, now + slot_delay_ms(KEYS[7], slot, default_ms))
  end
  redis.call('HSET', KEYS[6], slot, me .. '|' .. untl .. '|' .. count)
end
local acked = 0
for i = 4, #ARGV do
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then
    local rid = string.match(ARGV[i], '^(.*)|[^|]*$')
    if rid then
      local _, _, _, slot = entry(redis.call('HGET', KEYS[2], rid))
      release(slot)
      redis.call('HDEL', KEYS[2], rid)
      redis.call('HDEL', KEYS[5], rid)
      local kind = string.sub(rid, 1, 2)
      if kind == 'p:' or kind == 'r:' then
        redis.call('ZADD', KEYS[3], now, rid)
      end
    end
    acked = acked + 1
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[1]))
bump(KEYS[4], 'acked', acked)
return acked
"""
)

# KEYS: leases, req, owners; ARGV: lease_ms, token ('' leaves fleet politeness out), then
# lease members in this worker's hands (leased and waiting, or under way). Returns the
# members it no longer holds: their leases expired and their requests went back to the queue
# (perhaps to another worker already). The slots of those it holds stay its own as long.
RENEW = (
    NOW
    + CHECKED
    + HOSTS
    + """
local lost = {}
local until_ms = now + tonumber(ARGV[1])
for i = 3, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], until_ms, ARGV[i])
    local rid = string.match(ARGV[i], '^(.*)|[^|]*$')
    local _, _, _, slot = entry(rid and redis.call('HGET', KEYS[2], rid))
    if ARGV[2] ~= '' and slot and slot ~= '' then
      local token, untl, count = owner_of(KEYS[3], slot)
      if token == ARGV[2] and untl < until_ms then
        redis.call('HSET', KEYS[3], slot, token .. '|' .. until_ms .. '|' .. count)
      end
    end
  else
    table.insert(lost, ARGV[i])
  end
end
return lost
"""
)

# KEYS: solver, counters, solver_log; ARGV: token, lease_ms. Returns the new term, or 0.
ACQUIRE = (
    NOW
    + """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
local term = redis.call('HINCRBY', KEYS[2], 'solver_term', 1)
redis.call('RPUSH', KEYS[3], term .. ' ' .. ARGV[1] .. ' ' .. now)
return term
"""
)

# KEYS: solver, counters, solver_log; ARGV: token, lease_ms, term. The term the planner holds
# (extended), or 0 if it lost the lease. The log of terms is only ever appended to: if it no
# longer holds this planner's term, Redis lost its data since that term began (restarted
# without persistence, or evicted keys). The planner then holds the only copy of the state,
# and takes the lease back under a new term above every other, even from a worker that took
# it meanwhile with nothing but the sources.
RENEW_SOLVER = (
    NOW
    + """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(ARGV[3])
end
local mine = ARGV[3] .. ' ' .. ARGV[1] .. ' '
for _, line in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  if string.sub(line, 1, #mine) == mine then
    return 0
  end
end
local counter = tonumber(redis.call('HGET', KEYS[2], 'solver_term')) or 0
local new = math.max(counter, tonumber(ARGV[3])) + 1
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], 'solver_term', new)
redis.call('RPUSH', KEYS[3], new .. ' ' .. ARGV[1] .. ' ' .. now .. ' regained')
return new
"""
)

# KEYS: solver; ARGV: token
RELEASE_SOLVER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# KEYS: solver, snapshot, events, state, staged; ARGV: token, last applied event id, size.
# The state was uploaded to the staged key a block at a time (no one command carries it
# whole); it replaces the saved one here, at once, if this planner still holds the lease.
SAVE_SNAPSHOT = """
local size = tonumber(ARGV[3])
if redis.call('GET', KEYS[1]) ~= ARGV[1] or size == 0 or redis.call('STRLEN', KEYS[5]) ~= size then
  redis.call('DEL', KEYS[5])
  return 0
end
redis.call('RENAME', KEYS[5], KEYS[4])
redis.call('PERSIST', KEYS[4])
redis.call('HSET', KEYS[2], 'event', ARGV[2], 'size', ARGV[3])
redis.call('XTRIM', KEYS[3], 'MINID', ARGV[2])
return 1
"""

# KEYS: solver, snapshot, state, aside, aside's snapshot; ARGV: token. Moves an unreadable
# saved state aside (kept, never saved over), if this worker holds the lease. Returns 1 if
# moved.
SET_ASIDE_STATE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('EXISTS', KEYS[3]) == 0 then
  return 0
end
redis.call('RENAME', KEYS[3], KEYS[4])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('RENAME', KEYS[2], KEYS[5])
end
return 1
"""

# KEYS: solver, signals; ARGV: token, count. The lease holder takes (reads and deletes) up to
# count entries of the signals stream users add to: [[id, [field, value, ...]], ...]; a worker
# that no longer holds the lease takes none (they wait for the one that does).
TAKE_SIGNALS = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {}
end
local entries = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', ARGV[2])
for _, entry in ipairs(entries) do
  redis.call('XDEL', KEYS[2], entry[1])
end
return entries
"""

# KEYS: solver, sources; ARGV: token, count. The lease holder takes up to count of the sources
# users pushed; a worker that no longer holds the lease takes none.
TAKE_SOURCES = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {}
end
local taken = redis.call('LRANGE', KEYS[2], 0, tonumber(ARGV[2]) - 1)
redis.call('LTRIM', KEYS[2], #taken, -1)
return taken
"""

# KEYS: crawl; ARGV: who (project and spider class). Creates the crawl's identity if absent.
# Returns {who, created ms, 1 if created now else 0}.
CLAIM = (
    NOW
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'who', ARGV[1], 'created', now)
  return {ARGV[1], now, 1}
end
local held = redis.call('HMGET', KEYS[1], 'who', 'created')
return {held[1] or '', tonumber(held[2]) or 0, 0}
"""
)
