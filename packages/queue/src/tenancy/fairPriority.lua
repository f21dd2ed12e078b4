--[[
  A job's BullMQ priority from its tenant's virtual time: start-time fair queueing, one clock per
  queue (SPEC §14, docs/decisions/0029-fair-scheduling.md). BullMQ takes the job of the lowest
  priority first; a priority here is `floor(start) * 10 + level`, where `start` is the job's start
  tag and `level` the run's priority (1 first … 10), so ties between equal tags go to the higher
  priority, then to the job added first.

  The queue's virtual time V is the tag of the job at the head of BullMQ's prioritized set (the
  next to be taken), or, when nothing waits, the highest tag given so far. A tenant's job of level
  p starts at max(V, the tenant's last finish tag at levels 1..p) and finishes a `stride` (1 / the
  tenant's weight) later: a tenant that floods pushes only its own tags ahead; one that arrives
  starts at V, beside the head, so it waits for one job of each busy tenant at most. A
  tenant's jobs are strictly by level (SPEC §14: higher priority first, then enqueue order): the
  tenant's jobs at lower levels (higher numbers) queued at or after a job's start each move one
  stride later, keeping their order, and so do those levels' next starts. A tenant's waiting jobs
  are found in its index on the queue (`<clock>:w:<tenant>`, '<level>|<job id>' scored by the job's
  start), written here as jobs are asked for and trimmed of the jobs well behind V; moving costs a few
  writes per moved job, 1,000 jobs a call at most (a tenant with more waiting than that has its
  higher-priority job take its next turn among them instead), and happens only when a tenant's jobs
  mix levels (a job that is not in the prioritized set, not added yet or delayed, keeps its priority).
  When V passes half of BullMQ's range (2^21), every waiting job's priority and every stored tag is
  moved down by V (renormalised), so the tags never leave the range; a tag beyond the range is held
  at its top.

  One call gives the priorities of the jobs asked for together (a round's tool jobs, the runs a
  client enqueues at once), in order: the jobs take the places one call per job in turn would give
  them, in one read and one write of the clock.

  KEYS[1] the queue's fair clock (a hash: v, top, and <level>|<tenant> = the tenant's last finish tag)
  KEYS[2] BullMQ's prioritized set of the queue
  ARGV[1] the queue's job key prefix
  ARGV[2..] each job as four arguments: job id, tenant, level (1..10), stride (> 0); at most 1000 jobs
  Returns the jobs' priorities to add them with, in order (each 1 .. 2^21).
]]
local clock, prioritized = KEYS[1], KEYS[2]
local jobPrefix = ARGV[1]
local LEVELS = 10
local MAX_TAG = math.floor((2097152 - LEVELS) / LEVELS)
local SCORE = 0x100000000
-- A tag within a millionth of a whole number is that number, so strides of 1/3 add up to 1 however the floats round.
local EPSILON = 1e-6
local jobs = (#ARGV - 1) / 4
if jobs < 1 or jobs > 1000 or jobs ~= math.floor(jobs) then
  return redis.error_reply('ERR arcflow: fairPriority takes a job prefix and 1 to 1000 (job id, tenant, level, stride) quadruples')
end
for i = 2, #ARGV, 4 do
  local level, stride = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  if ARGV[i] == '' or not level or level < 1 or level > LEVELS or level ~= math.floor(level) or not stride or stride <= 0 then
    return redis.error_reply('ERR arcflow: fairPriority: a job id must not be empty, a level must be a whole number from 1 to 10 and a stride above 0')
  end
end

local function tagOfPriority(priority) return math.floor((priority - 1) / LEVELS) end
-- Ordered by its start (true start-time fair queueing), then by level.
local function priorityOf(start, level) return math.min(math.floor(start + EPSILON), MAX_TAG) * LEVELS + level end
-- A tenant's waiting jobs on this queue: '<level>|<job id>' scored by the job's start.
local function waitingOf(tenant) return clock .. ':w:' .. tenant end
-- Gives a waiting job another priority, in the prioritized set (keeping its place among equal
-- priorities) and in its hash; `score` is its score in the set, when read already. Returns whether
-- the job waits there.
local function reprioritize(id, priority, score)
  score = tonumber(score or redis.call('ZSCORE', prioritized, id))
  if not score then return false end
  local old = math.floor(score / SCORE)
  redis.call('ZADD', prioritized, priority * SCORE + (score - old * SCORE), id)
  redis.call('HSET', jobPrefix .. id, 'priority', priority)
  return true
end

local state = redis.call('HMGET', clock, 'v', 'top')
local v, top = tonumber(state[1]) or 0, tonumber(state[2]) or 0
-- V is the head's tag while jobs wait (none of these is added before the call ends); else the top.
local head = redis.call('ZRANGE', prioritized, 0, 0, 'WITHSCORES')
local headTag = head[2] and tagOfPriority(math.floor(tonumber(head[2]) / SCORE))
-- A tenant's index keeps its jobs from LAG tags behind the head (or behind the last call's V, when
-- nothing waits) on: a job asked for earlier may still be on its way to the queue (its add sent
-- after another call was), and must be found when a later job of a higher level moves it.
local LAG = 64
local trimBelow = (headTag or v) - LAG
if headTag then v = headTag else v = math.max(v, top) end

-- Renormalise: every waiting job, every stored tag and every tenant's index moves down by `shift`.
if v > MAX_TAG / 2 then
  local shift = math.floor(v) - 1
  local members = redis.call('ZRANGE', prioritized, 0, -1, 'WITHSCORES')
  for i = 1, #members, 2 do
    local priority = math.floor(tonumber(members[i + 1]) / SCORE)
    local tag = tagOfPriority(priority)
    reprioritize(members[i], math.max(0, tag - shift) * LEVELS + (priority - tag * LEVELS), members[i + 1])
  end
  local stored = redis.call('HGETALL', clock)
  local indexed = {}
  for i = 1, #stored, 2 do
    local name = stored[i]
    if name ~= 'v' and name ~= 'top' then
      local tag = (tonumber(stored[i + 1]) or 0) - shift
      -- A tag behind V no longer counts: its tenant starts at V.
      if tag <= v - shift then redis.call('HDEL', clock, name) else redis.call('HSET', clock, name, tostring(tag)) end
      local tenant = string.match(name, '^%d+|(.*)$')
      if tenant then indexed[tenant] = true end
    end
  end
  for tenant in pairs(indexed) do
    local key = waitingOf(tenant)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. trimBelow)
    local entries = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    for i = 1, #entries, 2 do redis.call('ZADD', key, tonumber(entries[i + 1]) - shift, entries[i]) end
  end
  v = v - shift
  trimBelow = trimBelow - shift
  if headTag then headTag = headTag - shift end
  top = math.max(v, top - shift)
end

-- Each tenant's last tag at each level, read once (after any renormalisation), and what changed.
local tenants, changed = {}, {}
local function lastOf(tenant)
  local last = tenants[tenant]
  if last then return last end
  local fields = {}
  for l = 1, LEVELS do fields[l] = l .. '|' .. tenant end
  local stored = redis.call('HMGET', clock, unpack(fields))
  last = {}
  for l = 1, LEVELS do last[l] = tonumber(stored[l]) end
  tenants[tenant] = last
  return last
end
-- Per tenant: this call's jobs ({at, level, start, member}), and the moves its jobs made ({start, level, stride}).
local asked, moves = {}, {}
local function listOf(lists, tenant)
  local list = lists[tenant]
  if not list then
    list = {}
    lists[tenant] = list
  end
  return list
end

local priorities = {}
for i = 2, #ARGV, 4 do
  local id, tenant, level, stride = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local last = lastOf(tenant)
  if not headTag then v = math.max(v, top) end
  -- A job of level p starts at max(V, the tenant's last tag at levels 1..p).
  local start = v
  for l = 1, level do
    if last[l] and last[l] > start then start = last[l] end
  end
  local tag = start + stride
  if tag > top then top = tag end
  last[level] = tag
  changed[level .. '|' .. tenant] = tag
  -- The tenant's jobs at lower levels queued from this start on move a stride later, and so do
  -- those levels' next starts: this job goes before them, and the tenant keeps its share.
  local moved = false
  for l = level + 1, LEVELS do
    if last[l] and last[l] > start + EPSILON then
      last[l] = last[l] + stride
      changed[l .. '|' .. tenant] = last[l]
      moved = true
    end
  end
  if moved then
    for _, job in ipairs(listOf(asked, tenant)) do
      if job.level > level and job.start >= start - EPSILON then
        job.start = job.start + stride
        priorities[job.at] = priorityOf(job.start, job.level)
      end
    end
    table.insert(listOf(moves, tenant), {start = start, level = level, stride = stride})
  end
  priorities[#priorities + 1] = priorityOf(start, level)
  table.insert(listOf(asked, tenant), {at = #priorities, level = level, start = start, member = level .. '|' .. id})
  -- On a queue where nothing waits, this job is the head once added: the batch's next jobs start
  -- from its tag, as they would if each were asked for after it was added.
  if not headTag then
    headTag = math.floor(start + EPSILON)
    v = headTag
  end
end

-- The tenants' jobs already waiting that this call's jobs go before, moved once each. A call moves
-- MOST_MOVED jobs at most, across its tenants (7–11 µs of Redis per moved job): a tenant with more
-- of its jobs waiting from the earliest move on than the call has left keeps them where they are,
-- and this call's jobs take its next turns among them (as the tenant's levels' next starts were
-- moved on, its later jobs still keep its share). An entry whose job no longer waits is dropped:
-- its job was taken, delayed or removed (one that has no hash yet and starts from V on may still
-- be on its way, and stays; V as the index's trim takes it).
local MOST_MOVED = 1000
local movedLeft = MOST_MOVED
-- Moves entry `member` of `key` to `start`, with its job when that still waits; an entry whose job is gone is dropped.
local function moveEntry(key, member, id, start, level, was)
  if not reprioritize(id, priorityOf(start, level)) and (was < trimBelow + LAG or redis.call('EXISTS', jobPrefix .. id) == 1) then
    redis.call('ZREM', key, member)
    return
  end
  redis.call('ZADD', key, start, member)
end
for tenant, list in pairs(moves) do
  local key, from = waitingOf(tenant), list[1].start
  for _, move in ipairs(list) do from = math.min(from, move.start) end
  local count = redis.call('ZCOUNT', key, from - EPSILON, '+inf')
  if count <= movedLeft then
    movedLeft = movedLeft - count
    -- Read whole, then written, so that no entry is read at its old place and its new one.
    local entries = redis.call('ZRANGEBYSCORE', key, from - EPSILON, '+inf', 'WITHSCORES')
    for i = 1, #entries, 2 do
      local member, was = entries[i], tonumber(entries[i + 1])
      local levelText, id = string.match(member, '^(%d%d?)|(.+)$')
      local level = tonumber(levelText)
      if level and level >= 1 and level <= LEVELS then
        local start = was
        for _, move in ipairs(list) do
          if level > move.level and start >= move.start - EPSILON then start = start + move.stride end
        end
        if start ~= was then moveEntry(key, member, id, start, level, was) end
      end
    end
  end
end
-- Each tenant's index: the jobs well behind V are gone (taken, or out of the prioritized set); this
-- call's join it. An index its tenant leaves alone for a day goes.
for tenant, list in pairs(asked) do
  local key, adds = waitingOf(tenant), {}
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. trimBelow)
  for _, job in ipairs(list) do
    adds[#adds + 1] = job.start
    adds[#adds + 1] = job.member
  end
  -- A job id asked for again (a job removed and added anew) takes its new start.
  redis.call('ZADD', key, unpack(adds))
  redis.call('PEXPIRE', key, 86400000)
end

local writes = {'v', tostring(v), 'top', tostring(top)}
for name, tag in pairs(changed) do
  writes[#writes + 1] = name
  writes[#writes + 1] = tostring(tag)
end
redis.call('HSET', clock, unpack(writes))
return priorities
