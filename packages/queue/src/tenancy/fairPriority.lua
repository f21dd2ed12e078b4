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
  job of level p also moves the tenant's lower levels' next start a stride on, when they are
  ahead of it: its jobs queued at those levels keep their tags and take turns with it.
  When V passes half of BullMQ's range (2^21), every waiting job's priority and every stored tag is
  moved down by V (renormalised), so the tags never leave the range; a tag beyond the range is held
  at its top.

  One call gives the priorities of the jobs asked for together (a round's tool jobs, the runs a
  client enqueues at once), in order: the same as one call per job in turn would give them, in one
  read and one write of the clock.

  KEYS[1] the queue's fair clock (a hash: v, top, and <level>|<tenant> = the tenant's last finish tag)
  KEYS[2] BullMQ's prioritized set of the queue
  ARGV[1] the queue's job key prefix
  ARGV[2..] each job as three arguments: tenant, level (1..10), stride (> 0); at most 1000 jobs
  Returns the jobs' priorities to add them with, in order (each 1 .. 2^21).
]]
local clock, prioritized = KEYS[1], KEYS[2]
local jobPrefix = ARGV[1]
local LEVELS = 10
local MAX_TAG = math.floor((2097152 - LEVELS) / LEVELS)
local SCORE = 0x100000000
local jobs = (#ARGV - 1) / 3
if jobs < 1 or jobs > 1000 or jobs ~= math.floor(jobs) then
  return redis.error_reply('ERR arcflow: fairPriority takes a job prefix and 1 to 1000 (tenant, level, stride) triples')
end
for i = 2, #ARGV, 3 do
  local level, stride = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  if not level or level < 1 or level > LEVELS or level ~= math.floor(level) or not stride or stride <= 0 then
    return redis.error_reply('ERR arcflow: fairPriority: a level must be a whole number from 1 to 10 and a stride above 0')
  end
end

local function tagOfPriority(priority) return math.floor((priority - 1) / LEVELS) end

local state = redis.call('HMGET', clock, 'v', 'top')
local v, top = tonumber(state[1]) or 0, tonumber(state[2]) or 0
-- V is the head's tag while jobs wait (none of these is added before the call ends); else the top.
local head = redis.call('ZRANGE', prioritized, 0, 0, 'WITHSCORES')
local headTag = head[2] and tagOfPriority(math.floor(tonumber(head[2]) / SCORE))
if headTag then v = headTag else v = math.max(v, top) end

-- Renormalise: every waiting job, and every stored tag, moves down by `shift`.
if v > MAX_TAG / 2 then
  local shift = math.floor(v) - 1
  local members = redis.call('ZRANGE', prioritized, 0, -1, 'WITHSCORES')
  for i = 1, #members, 2 do
    local score = tonumber(members[i + 1])
    local priority = math.floor(score / SCORE)
    local counter = score - priority * SCORE
    local tag = tagOfPriority(priority)
    local moved = math.max(0, tag - shift) * LEVELS + (priority - tag * LEVELS)
    redis.call('ZADD', prioritized, moved * SCORE + counter, members[i])
    redis.call('HSET', jobPrefix .. members[i], 'priority', moved)
  end
  local stored = redis.call('HGETALL', clock)
  for i = 1, #stored, 2 do
    local name = stored[i]
    if name ~= 'v' and name ~= 'top' then
      local tag = tonumber(stored[i + 1]) - shift
      -- A tag behind V no longer counts: its tenant starts at V.
      if tag <= v - shift then redis.call('HDEL', clock, name) else redis.call('HSET', clock, name, tostring(tag)) end
    end
  end
  v = v - shift
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

local priorities = {}
for i = 2, #ARGV, 3 do
  local tenant, level, stride = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
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
  -- The tenant's lower levels pay for this job: their next jobs start a stride later (those queued
  -- already keep their places), so the tenant's later jobs keep its share to its weight.
  for l = level + 1, LEVELS do
    if last[l] and last[l] >= tag then
      last[l] = last[l] + stride
      changed[l .. '|' .. tenant] = last[l]
    end
  end
  -- Ordered by its start (true start-time fair queueing): a tag within a millionth of a whole
  -- number is that number, so strides of 1/3 add up to 1 however the floats round.
  local startTag = math.floor(start + 1e-6)
  priorities[#priorities + 1] = math.min(startTag, MAX_TAG) * LEVELS + level
  -- On a queue where nothing waits, this job is the head once added: the batch's next jobs start
  -- from its tag, as they would if each were asked for after it was added.
  if not headTag then
    headTag = startTag
    v = headTag
  end
end
local writes = {'v', tostring(v), 'top', tostring(top)}
for name, tag in pairs(changed) do
  writes[#writes + 1] = name
  writes[#writes + 1] = tostring(tag)
end
redis.call('HSET', clock, unpack(writes))
return priorities
