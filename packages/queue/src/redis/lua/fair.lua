--[[
  Fair scheduling across tenants (SPEC §14, docs/decisions/0029-fair-scheduling.md): a job's
  BullMQ priority from its tenant's virtual time, start-time fair queueing, one clock per queue.
  Included by tenancy/fairPriority.lua (a queue's priorities asked for on their own) and by the
  store scripts that record what decides a run's next jobs (steps/recordResponse.lua,
  calls/recordToolResult.lua, runs/createRun.lua), which place those jobs in the same call.

  BullMQ takes the job of the lowest priority first; a priority here is `tag * 10 + level`, where
  `tag` is the job's start tag and `level` the run's priority (1 first … 10), so ties between equal
  tags go to the higher priority.

  The queue's virtual time V is the tag of the job at the head of BullMQ's prioritized set (the
  next to be taken), or, when nothing waits, the highest tag given so far. A tenant's job of level
  p starts at max(V, the tenant's last tag at levels 1..p) and takes `stride` (1 / the tenant's
  weight): a tenant that floods pushes only its own tags ahead; one that arrives starts at V. A
  job of level p also moves the tenant's lower levels' next start a stride on, when they are
  ahead of it: its jobs queued at those levels keep their tags and take turns with it.
  When V passes half of BullMQ's range (2^21), every waiting job's priority and every stored tag is
  moved down by V (renormalised), so the tags never leave the range; a tag beyond the range is held
  at its top.

  A queue's keys, from its BullMQ key prefix (`<tag>:<queue name>:`): `arcflow-fair`, its clock (a
  hash: v, top, and <level>|<tenant> = the tenant's last tag), and BullMQ's `prioritized` set.
]]
local FAIR_LEVELS = 10
local FAIR_MAX_TAG = math.floor((2097152 - FAIR_LEVELS) / FAIR_LEVELS)
local FAIR_SCORE = 0x100000000

-- Why a job's level and stride cannot be placed; nil when they can.
local function fairRefusal(level, stride)
  if not level or level < 1 or level > FAIR_LEVELS or level ~= math.floor(level) or not stride or stride <= 0 then
    return 'a fair level must be a whole number from 1 to 10 and a stride above 0'
  end
end

--[[
  The priorities of jobs of one queue, asked for together, in order: the same as one call per job
  in turn would give them, in one read and one write of the clock.
  clock, prioritized: the queue's clock and prioritized set; jobPrefix: its BullMQ key prefix;
  asks: a list of {tenant, level, stride} (checked).
]]
local function fairPriorities(clock, prioritized, jobPrefix, asks)
  local function tagOfPriority(priority) return math.floor((priority - 1) / FAIR_LEVELS) end

  local state = redis.call('HMGET', clock, 'v', 'top')
  local v, top = tonumber(state[1]) or 0, tonumber(state[2]) or 0
  -- V is the head's tag while jobs wait (none of these is added before the call ends); else the top.
  local head = redis.call('ZRANGE', prioritized, 0, 0, 'WITHSCORES')
  local headTag = head[2] and tagOfPriority(math.floor(tonumber(head[2]) / FAIR_SCORE))
  if headTag then v = headTag else v = math.max(v, top) end

  -- Renormalise: every waiting job, and every stored tag, moves down by `shift`.
  if v > FAIR_MAX_TAG / 2 then
    local shift = math.floor(v) - 1
    local members = redis.call('ZRANGE', prioritized, 0, -1, 'WITHSCORES')
    for i = 1, #members, 2 do
      local score = tonumber(members[i + 1])
      local priority = math.floor(score / FAIR_SCORE)
      local counter = score - priority * FAIR_SCORE
      local tag = tagOfPriority(priority)
      local moved = math.max(0, tag - shift) * FAIR_LEVELS + (priority - tag * FAIR_LEVELS)
      redis.call('ZADD', prioritized, moved * FAIR_SCORE + counter, members[i])
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
    for l = 1, FAIR_LEVELS do fields[l] = l .. '|' .. tenant end
    local stored = redis.call('HMGET', clock, unpack(fields))
    last = {}
    for l = 1, FAIR_LEVELS do last[l] = tonumber(stored[l]) end
    tenants[tenant] = last
    return last
  end

  local priorities = {}
  for _, ask in ipairs(asks) do
    local tenant, level, stride = ask[1], ask[2], ask[3]
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
    -- already keep their places), so a tenant's share stays its weight's whatever the priorities.
    for l = level + 1, FAIR_LEVELS do
      if last[l] and last[l] >= tag then
        last[l] = last[l] + stride
        changed[l .. '|' .. tenant] = last[l]
      end
    end
    priorities[#priorities + 1] = math.min(math.floor(tag), FAIR_MAX_TAG) * FAIR_LEVELS + level
  end
  local writes = {'v', tostring(v), 'top', tostring(top)}
  for name, tag in pairs(changed) do
    writes[#writes + 1] = name
    writes[#writes + 1] = tostring(tag)
  end
  redis.call('HSET', clock, unpack(writes))
  return priorities
end

--[[
  A run's next jobs placed among the tenants, by a store script of the run: `placing` is
  {tenant, level, stride, jobs = {job id, queue key prefix, …}}, every queue under the run's hash
  tag (the caller's guarantee: the run's slot in Redis Cluster). The jobs of each queue are placed
  in the order given, one fairPriorities call per queue. Returns `job id, priority, …` as JSON, for
  the script to keep with what it recorded and to return.
]]
local function fairPlacingRefusal(placing)
  if type(placing) ~= 'table' or type(placing.tenant) ~= 'string' or type(placing.jobs) ~= 'table' or #placing.jobs % 2 ~= 0 then
    return 'placing must be {tenant, level, stride, jobs = {job id, queue prefix, …}}'
  end
  for _, text in ipairs(placing.jobs) do
    if type(text) ~= 'string' or text == '' then return 'placing.jobs must hold job ids and queue prefixes' end
  end
  return fairRefusal(tonumber(placing.level), tonumber(placing.stride))
end

local function fairPlace(placing)
  local ask = {placing.tenant, tonumber(placing.level), tonumber(placing.stride)}
  local queues, order = {}, {}
  for i = 1, #placing.jobs, 2 do
    local prefix = placing.jobs[i + 1]
    if not queues[prefix] then
      queues[prefix] = {}
      order[#order + 1] = prefix
    end
    local asks = queues[prefix]
    asks[#asks + 1] = ask
  end
  local placed, taken = {}, {}
  for _, prefix in ipairs(order) do
    taken[prefix] = fairPriorities(prefix .. 'arcflow-fair', prefix .. 'prioritized', prefix, queues[prefix])
    queues[prefix] = 0
  end
  for i = 1, #placing.jobs, 2 do
    local prefix = placing.jobs[i + 1]
    queues[prefix] = queues[prefix] + 1
    placed[#placed + 1] = placing.jobs[i]
    placed[#placed + 1] = taken[prefix][queues[prefix]]
  end
  return cjson.encode(placed)
end
