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
fleet for ever (one that crashes every worker taking it), which keeps the last ones set aside
(``dead_since`` orders them). The scripts of the planner's lease and saved state are in
:mod:`.planner_scripts`.
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

# Acknowledgements, run by the lease script before it leases: one script call (and one read
# of the clock) per exchange. KEYS by name: leases, req, done, counters, attempts, owners,
# host_delay. A worker's last lease of a slot acked, it keeps the slot for the slot's delay.
ACKS = """
local function ack(members, done_ttl_ms, me, default_ms, k)
  local function release(slot)
    if me == '' or not slot or slot == '' then return end
    local token, untl, count = owner_of(k.owners, slot)
    if token ~= me then return end
    count = math.max(0, count - 1)
    if count == 0 then
      untl = math.min(untl, now + slot_delay_ms(k.host_delay, slot, default_ms))
    end
    redis.call('HSET', k.owners, slot, me .. '|' .. untl .. '|' .. count)
  end
  local acked = 0
  for _, member in ipairs(members) do
    if redis.call('ZREM', k.leases, member) == 1 then
      local rid = string.match(member, '^(.*)|[^|]*$')
      if rid then
        local _, _, _, slot = entry(redis.call('HGET', k.req, rid))
        release(slot)
        redis.call('HDEL', k.req, rid)
        redis.call('HDEL', k.attempts, rid)
        local kind = string.sub(rid, 1, 2)
        if kind == 'p:' or kind == 'r:' then
          redis.call('ZADD', k.done, now, rid)
        end
      end
      acked = acked + 1
    end
  end
  if #members > 0 then
    redis.call('ZREMRANGEBYSCORE', k.done, '-inf', now - done_ttl_ms)
    bump(k.counters, 'acked', acked)
  end
  return acked
end
"""

# KEYS: queue, plainq, req, leases, budget, served, counters, attempts, dead, owners,
#       host_next, host_delay, dead_since, done, plain_tail
# ARGV: want, lease_ms, rate (requests/s, 0: no limit), burst (requests), plain_share,
#       max_attempts, token (the worker's; '' leaves fleet politeness out), default delay
#       (ms), horizon (ms: how far ahead a slot's turn may be to lease its request now),
#       dead kept (requests ``dead`` holds at most: past it the oldest go, counted),
#       done_ttl_ms, then the lease members to acknowledge first (:data:`ACKS`)
# Returns {{member, payload, ...}, {dead request ids}, malformed entries removed, acked,
# {Redis's TIME}}. A request leased more than max_attempts times (its workers died or never
# reported it) moves to ``dead`` instead; a stored entry that is not a request entry is
# removed. Each lane is scanned in queue order up to SCAN entries: a request whose slot is
# another worker's, or not due yet, keeps its place for a later round; in the plain lane
# (the spider's requests, queued by time) it moves to when its slot frees, if later, behind
# those of its slot moved before (``plain_tail``: the last score a slot's were moved to).
LEASE = (
    NOW
    + CHECKED
    + HOSTS
    + ACKS
    + """
local members = {}
for i = 12, #ARGV do members[#members + 1] = ARGV[i] end
local acked = ack(members, tonumber(ARGV[11]), ARGV[7], tonumber(ARGV[8]),
  {leases = KEYS[4], req = KEYS[3], done = KEYS[14], counters = KEYS[7], attempts = KEYS[8],
   owners = KEYS[10], host_delay = KEYS[12]})
if tonumber(ARGV[1]) <= 0 then return {{}, {}, 0, acked, t} end  -- acks only
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
local dead_kept = tonumber(ARGV[10])
-- Each slot's owner and turn are read once per lease round and written back at its end: a
-- round leasing many requests of few hosts (or passing over a busy host's) reads each host
-- once, not per request.
local slots = {}
local function slot_of(slot)
  local s = slots[slot]
  if not s then
    local token, untl, count = owner_of(KEYS[10], slot)
    local turn = finite(tonumber(redis.call('HGET', KEYS[11], slot))) or 0
    s = {token = token, untl = untl, count = count, turn = turn}
    slots[slot] = s
  end
  return s
end
local function slot_free(slot)
  if me == '' or slot == '' then return true end
  local s = slot_of(slot)
  if s.token and s.token ~= me and s.untl > now then return false end
  return s.turn <= now + horizon
end
local function free_at(slot)  -- when a busy slot may next be leased (ms)
  local s = slot_of(slot)
  local at = s.turn - horizon
  if s.token and s.token ~= me and s.untl > at then at = s.untl end
  return at
end
local function take_slot(slot)
  if me == '' or slot == '' then return end
  local s = slot_of(slot)
  if s.token ~= me or s.untl <= now then s.count = 0 end  -- a new tenure
  s.token, s.untl, s.count = me, math.max(s.untl, now + lease_ms), s.count + 1
  s.gap = s.gap or slot_delay_ms(KEYS[12], slot, default_ms)
  s.turn = math.max(s.turn, now) + s.gap
  s.taken = true
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
-- A lane is read a page at a time, the first as large as the lease asks, each next one twice
-- the last (up to SCAN entries in all): a lease of one reads one entry, not SCAN, unless it
-- has to pass over requests whose slot is busy. Those stay queued, so the next page starts
-- after the entries read minus those removed.
local function scanned(key)
  return {key = key, ids = {}, at = 1, read = 0, removed = 0, page = math.max(1, want)}
end
local echo, plain = scanned(KEYS[1]), scanned(KEYS[2])
local function peek(l)
  if l.at > #l.ids and not l.done then
    local size = math.min(l.page, SCAN - l.read)
    if size > 0 then
      local start = l.read - l.removed
      l.ids, l.at = redis.call('ZRANGE', l.key, start, start + size - 1), 1
      l.read, l.page = l.read + #l.ids, size * 2
    end
    l.done = size <= 0 or #l.ids < size  -- the lane ran out, or SCAN entries were read
  end
  return l.ids[l.at]
end
while n < want do
  local l
  local plain_left, echo_left = peek(plain), peek(echo)
  if plain_left and (sp <= share * (se + sp) or not echo_left) then
    l = plain
  elseif echo_left then
    l = echo
  else
    break
  end
  local key, rid = l.key, l.ids[l.at]
  l.at = l.at + 1
  local stored = redis.call('HGET', KEYS[3], rid)
  local lane, payload, slot, _
  if stored then lane, _, payload, slot = entry(stored) end
  if not stored then
    redis.call('ZREM', key, rid)  -- queued without an entry: nothing to lease
    l.removed = l.removed + 1
  elseif not lane then
    redis.call('ZREM', key, rid)
    l.removed = l.removed + 1
    drop(rid)
  elseif slot_free(slot) then
    redis.call('ZREM', key, rid)
    l.removed = l.removed + 1
    if bump(KEYS[8], rid, 1) > max_attempts then
      redis.call('HSET', KEYS[9], rid, stored)
      redis.call('ZADD', KEYS[13], now, rid)
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
  elseif key == KEYS[2] then
    -- The spider's requests for a busy slot go behind what can be leased before that slot
    -- frees, in their order (each moved as far as the first one met): else a spider that
    -- yields more than SCAN requests for one slow or held host would keep every other
    -- host's plain requests out of the scan.
    local s = slot_of(slot)
    local score = tonumber(redis.call('ZSCORE', key, rid))
    local at = free_at(slot)
    if score and score < at then
      s.tail = s.tail or finite(tonumber(redis.call('HGET', KEYS[15], slot))) or 0
      s.tail = math.max(at, s.tail + 1)  -- (after the slot's requests moved before it)
      redis.call('ZADD', key, s.tail, rid)
      s.moved = true
      l.removed = l.removed + 1  -- (it left its rank: the next page starts one earlier)
    end
  end
end
for slot, s in pairs(slots) do
  if s.taken then
    redis.call('HSET', KEYS[10], slot, me .. '|' .. s.untl .. '|' .. s.count)
    redis.call('HSET', KEYS[11], slot, s.turn)
  end
  if s.moved then redis.call('HSET', KEYS[15], slot, s.tail) end
end
if rate > 0 then
  redis.call('HSET', KEYS[5], 'tokens', tostring(tokens - n), 'ts', tostring(now))
end
redis.call('HSET', KEYS[6], 'e', se, 'p', sp)
if #dead > 0 then
  bump(KEYS[7], 'dead', #dead)
  -- Set aside for good only up to dead_kept: past it the oldest go (counted), so a crawl
  -- that runs for months keeps a bounded ``dead``. (An id taken out of ``dead`` by hand may
  -- stay in ``dead_since``: popping it removes nothing.)
  local dropped = 0
  while redis.call('HLEN', KEYS[9]) > dead_kept do
    local oldest = redis.call('ZPOPMIN', KEYS[13])
    if #oldest == 0 then break end
    dropped = dropped + redis.call('HDEL', KEYS[9], oldest[1])
  end
  if dropped > 0 then bump(KEYS[7], 'dead_dropped', dropped) end
end
if malformed > 0 then bump(KEYS[7], 'malformed', malformed) end
return {out, dead, malformed, acked, t}
"""
)

# KEYS: queue, plainq, req, done, solver, dead, counters
# ARGV: token ('' for a worker's plain requests), then rid, lane, score, slot, json per
# request. Returns {added, {ids set aside in dead: not queued again}, pushes}; {-1, {}, 0} if
# not the lease holder. ``pushes`` counts the planner's pushes in ``counters``: it only grows,
# so a planner that later reads it lower knows Redis lost its writes since (it came back from
# an older copy) and queues again what it has outstanding.
PUSH = (
    CHECKED
    + """
if ARGV[1] ~= '' and redis.call('GET', KEYS[5]) ~= ARGV[1] then
  return {-1, {}, 0}
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
local pushes = 0
if ARGV[1] ~= '' then pushes = bump(KEYS[7], 'planner_pushes', 1) end
return {added, dead, pushes}
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

# KEYS: host_next, host_hold; ARGV: pairs of a download slot and the ms its host asked to be
# left alone (Retry-After) from now. Moves each slot's next turn to at least then, so no
# worker of the fleet is leased its requests before (a turn is leased up to the horizon
# ahead: the worker adds it to the ms), and notes the hold in ``host_hold`` for the planner,
# which then queues none of the slot's requests (:data:`HOLDS`). Returns how many turns it
# moved.
HOLD = (
    NOW
    + CHECKED
    + """
local moved = 0
for i = 1, #ARGV - 1, 2 do
  local hold = finite(tonumber(ARGV[i + 1]))
  if hold and hold > 0 then
    local turn = finite(tonumber(redis.call('HGET', KEYS[1], ARGV[i]))) or 0
    if now + hold > turn then
      redis.call('HSET', KEYS[1], ARGV[i], now + hold)
      moved = moved + 1
    end
    local noted = finite(tonumber(redis.call('HGET', KEYS[2], ARGV[i]))) or 0
    if now + hold > noted then redis.call('HSET', KEYS[2], ARGV[i], now + hold) end
  end
end
return moved
"""
)

# KEYS: host_hold. Returns {slot, ms left, ...} for the slots whose hosts' holds still run,
# and deletes the ended ones (and any value that is not a time): the holds the planner reads
# each round, so it stops queueing a held host's requests whichever worker heard it.
HOLDS = (
    NOW
    + CHECKED
    + """
local held = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #held - 1, 2 do
  local untl = finite(tonumber(held[i + 1]))
  if untl and untl > now then
    table.insert(out, held[i])
    table.insert(out, tostring(untl - now))
  else
    redis.call('HDEL', KEYS[1], held[i])
  end
end
return out
"""
)

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
