"""The Lua scripts of the planner's lease and of what only the planner writes: its saved state
and what users push for it (sources and signals). Each is atomic on the server.

What users push is taken durably: the planner reads it without deleting it (a pushed source
moves from the ``sources`` list to the ``sources_taken`` stream as it is read), and only the
save of a state that applied it removes it, in the same script that puts the state in place.
A planner that dies between reading and saving loses nothing: its successor loads the last
saved state and reads again every entry that state did not apply.
"""

from scrapy_echo.distributed.scripts import NOW

# Appends a line to solver_log (KEYS[3]) and keeps its last ``kept`` lines.
_LOG_TERM = """
local function log_term(line, kept)
  redis.call('RPUSH', KEYS[3], line)
  redis.call('LTRIM', KEYS[3], -tonumber(kept), -1)
end
"""

# KEYS: solver, counters, solver_log; ARGV: token, lease_ms, lines the log keeps. Returns the
# new term, or 0.
ACQUIRE = (
    NOW
    + _LOG_TERM
    + """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
local term = redis.call('HINCRBY', KEYS[2], 'solver_term', 1)
log_term(term .. ' ' .. ARGV[1] .. ' ' .. now, ARGV[3])
return term
"""
)

# KEYS: solver, counters, solver_log; ARGV: token, lease_ms, term, lines the log keeps. The
# term the planner holds (extended), or 0 if it lost the lease. The log of terms is only
# appended to (and its oldest lines dropped past the cap): if this planner's term would still
# be in it and is not, Redis lost its data since that term began (restarted without
# persistence, or evicted keys). The planner then holds the only copy of the state, and takes
# the lease back under a new term above every other, even from a worker that took it
# meanwhile with nothing but the sources. Terms only grow along the log, so when its oldest
# line is of a later term, this planner's line may have been dropped by the cap: the log
# cannot tell, and the planner steps down (so many terms came after its own that the fleet
# has moved on).
RENEW_SOLVER = (
    NOW
    + _LOG_TERM
    + """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(ARGV[3])
end
local term = tonumber(ARGV[3])
local mine = ARGV[3] .. ' ' .. ARGV[1] .. ' '
local log = redis.call('LRANGE', KEYS[3], 0, -1)
for _, line in ipairs(log) do
  if string.sub(line, 1, #mine) == mine then
    return 0
  end
end
local oldest = log[1] and tonumber(string.match(log[1], '^(%d+) '))
if oldest and oldest > term then
  return 0
end
local counter = tonumber(redis.call('HGET', KEYS[2], 'solver_term')) or 0
local new = math.max(counter, term) + 1
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], 'solver_term', new)
log_term(new .. ' ' .. ARGV[1] .. ' ' .. now .. ' regained', ARGV[4])
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

# KEYS: solver, snapshot, events, state, staged, sources_taken, signals; ARGV: token, last
# applied event id, size, last applied source id, last applied signal id ('0-0': none).
# The state was uploaded to the staged key a block at a time (no one command carries it
# whole); it replaces the saved one here, at once, if this planner still holds the lease.
# What the state applied leaves Redis with it: the events up to its last (that one is kept:
# the stream is read after it), and the pushed sources and signals up to and including its
# last, so those streams hold exactly what the saved state has not applied.
SAVE_SNAPSHOT = """
local size = tonumber(ARGV[3])
if redis.call('GET', KEYS[1]) ~= ARGV[1] or size == 0 or redis.call('STRLEN', KEYS[5]) ~= size then
  redis.call('DEL', KEYS[5])
  return 0
end
redis.call('RENAME', KEYS[5], KEYS[4])
redis.call('PERSIST', KEYS[4])
redis.call('HSET', KEYS[2], 'event', ARGV[2], 'size', ARGV[3], 'source', ARGV[4],
           'signal', ARGV[5])
redis.call('HINCRBY', KEYS[2], 'saves', 1)  -- (a reader of the blocks sees a save land)
redis.call('XTRIM', KEYS[3], 'MINID', ARGV[2])
-- (pcall: a key users made something else than a stream must not undo the save half-way.)
for i, key in ipairs({KEYS[6], KEYS[7]}) do
  local last = ARGV[3 + i]
  if last ~= '0-0' then
    redis.pcall('XTRIM', key, 'MINID', last)
    redis.pcall('XDEL', key, last)
  end
end
return 1
"""

# KEYS: solver, snapshot, state, aside, aside's snapshot; ARGV: token, kept (ms). Moves an
# unreadable saved state aside (never saved over), for ``kept`` ms (its owner's time to look
# at it: set aside again and again, states would pile up), if this worker holds the lease.
# Returns 1 if moved.
SET_ASIDE_STATE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('EXISTS', KEYS[3]) == 0 then
  return 0
end
redis.call('RENAME', KEYS[3], KEYS[4])
redis.call('PEXPIRE', KEYS[4], ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('RENAME', KEYS[2], KEYS[5])
  redis.call('PEXPIRE', KEYS[5], ARGV[2])
end
return 1
"""

# KEYS: solver, signals; ARGV: token, after (the last signal this planner applied), count.
# The lease holder reads up to count entries of the signals stream users add to, after
# ``after``: [[id, [field, value, ...]], ...]. Nothing is deleted here (SAVE_SNAPSHOT does).
# A worker that no longer holds the lease reads none.
TAKE_SIGNALS = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {}
end
return redis.call('XRANGE', KEYS[2], '(' .. ARGV[2], '+', 'COUNT', ARGV[3])
"""

# KEYS: solver, sources, sources_taken; ARGV: token, after (the last source this planner
# applied), count. The lease holder reads up to count pushed sources: first those taken
# before and not yet in a saved state (in sources_taken, after ``after``), then, for the
# rest, the oldest still in the sources list users push to, moved to sources_taken as they
# are read. Returns [[id, url], ...]; a worker that no longer holds the lease reads none.
TAKE_SOURCES = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {}
end
local out = {}
for _, entry in ipairs(redis.call('XRANGE', KEYS[3], '(' .. ARGV[2], '+', 'COUNT', ARGV[3])) do
  table.insert(out, {entry[1], entry[2][2] or ''})
end
local room = tonumber(ARGV[3]) - #out
if room > 0 then
  local pushed = redis.call('LRANGE', KEYS[2], 0, room - 1)
  if #pushed > 0 then
    redis.call('LTRIM', KEYS[2], #pushed, -1)
    for _, url in ipairs(pushed) do
      table.insert(out, {redis.call('XADD', KEYS[3], '*', 'url', url), url})
    end
  end
end
return out
"""
