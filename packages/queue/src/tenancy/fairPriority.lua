--[[
  A job's BullMQ priority from its tenant's virtual time: start-time fair queueing, one clock per
  queue (SPEC §14, docs/decisions/0029-fair-scheduling.md). BullMQ takes the job of the lowest
  priority first; a priority here is `tag * 10 + level`, where `tag` is the job's start tag and
  `level` the run's priority (1 first … 10), so ties between equal tags go to the higher priority.

  The queue's virtual time V is the tag of the job at the head of BullMQ's prioritized set (the
  next to be taken), or, when nothing waits, the highest tag given so far. A tenant's job of level
  p starts at max(V, the tenant's last tag at levels 1..p) and takes `stride` (1 / the tenant's
  weight): a tenant that floods pushes only its own tags ahead; one that arrives starts at V. A
  job of level p also moves the tenant's lower levels' next start a stride on, when they are
  ahead of it: its jobs queued at those levels keep their tags and take turns with it.
  When V passes half of BullMQ's range (2^21), every waiting job's priority and every stored tag is
  moved down by V (renormalised), so the tags never leave the range; a tag beyond the range is held
  at its top.

  KEYS[1] the queue's fair clock (a hash: v, top, and <level>|<tenant> = the tenant's last tag)
  KEYS[2] BullMQ's prioritized set of the queue
  ARGV[1] tenant   ARGV[2] level (1..10)   ARGV[3] stride (> 0)   ARGV[4] the queue's job key prefix
  Returns the priority to add the job with (1 .. 2^21).
]]
local clock, prioritized = KEYS[1], KEYS[2]
local tenant, level, stride, jobPrefix = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local LEVELS = 10
local MAX_TAG = math.floor((2097152 - LEVELS) / LEVELS)
local SCORE = 0x100000000

local function tagOfPriority(priority) return math.floor((priority - 1) / LEVELS) end

-- One read of the clock: V, the top tag, and the tenant's last tag at each level.
local fields = {'v', 'top'}
for l = 1, LEVELS do fields[l + 2] = l .. '|' .. tenant end
local state = redis.call('HMGET', clock, unpack(fields))
local v, top = tonumber(state[1]) or 0, tonumber(state[2]) or 0
local last = {}
for l = 1, LEVELS do last[l] = tonumber(state[l + 2]) end
local head = redis.call('ZRANGE', prioritized, 0, 0, 'WITHSCORES')
if head[2] then
  v = tagOfPriority(math.floor(tonumber(head[2]) / SCORE))
else
  v = math.max(v, top)
end

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
  top = math.max(v, top - shift)
  for l = 1, LEVELS do
    if last[l] then
      last[l] = last[l] - shift
      if last[l] <= v then last[l] = nil end
    end
  end
end

local start = v
for l = 1, level do
  local tag = last[l]
  if tag and tag > start then start = tag end
end
local tag = start + stride
if tag > top then top = tag end
local writes = {'v', tostring(v), 'top', tostring(top), level .. '|' .. tenant, tostring(tag)}
-- The tenant's lower levels pay for this job: their next jobs start a stride later (those queued
-- already keep their places), so a tenant's share stays its weight's whatever the priorities.
for l = level + 1, LEVELS do
  local later = last[l]
  if later and later >= tag then
    writes[#writes + 1] = l .. '|' .. tenant
    writes[#writes + 1] = tostring(later + stride)
  end
end
redis.call('HSET', clock, unpack(writes))
return math.min(math.floor(tag), MAX_TAG) * LEVELS + level
