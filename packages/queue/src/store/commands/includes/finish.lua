--[[
  Ending a run, shared by finishRun and recordResponse. `ending` is a map:
    status            'completed' | 'failed' | 'cancelled'
    step_id, ts       the step the run ends in; when (ms)
    output?, error?   the record's output text and error JSON
    output_type?      'json' when output is the JSON text of a structured answer (SPEC §11)
    error_code?       RunFailed's code
    closing?          {content, code}: close every fanned-out call still open with this result
                      and a ToolCallFailed of this code (a cancel; a run failed as stalled)
    retention_seconds every key of the run expires this long after
    steps?            a workflow run's steps still open: {running = status they end in,
                      skip_reason = StepSkipped reason for those not started}
    events            the step's last events, {dedupeId, json} pairs
  Then the run's terminal event, with the usage summed in Redis. A run on a thread (SPEC §11)
  that completes appends its staged messages to the thread here, in the write that completes it,
  so once; any ending sets the thread's retention again. The run's stream gets its `end` chunk
  here, so exactly once and last (SPEC §12), and a `tool_result` for each call a cancel closes; a
  cancelled run with no output given keeps the text its stream shows last as its output.
  Needs includes/stream.lua. Returns the closed calls (JSON); runFacts gives what the ending
  process's metrics name the run by.
]]
local function checkEnding(ending)
  if type(ending) ~= 'table' then refuse('ending must be a map') end
  local status = ending.status
  if status ~= 'completed' and status ~= 'failed' and status ~= 'cancelled' then refuse('status must be completed, failed or cancelled') end
  needText('step_id', ending.step_id)
  needWhole('ts', ending.ts)
  needWhole('retention_seconds', ending.retention_seconds)
  if ending.output ~= nil then needText('output', ending.output) end
  if ending.output_type ~= nil then needText('output_type', ending.output_type) end
  if ending.error ~= nil then needText('error', ending.error) end
  if ending.error_code ~= nil then needText('error_code', ending.error_code) end
  if ending.closing ~= nil then
    if type(ending.closing) ~= 'table' then refuse('closing must be a map') end
    needText('closing.content', ending.closing.content)
    needText('closing.code', ending.closing.code)
  end
  needEvents('events', ending.events)
  if ending.steps ~= nil then
    if type(ending.steps) ~= 'table' then refuse('steps must be a map') end
    needText('steps.running', ending.steps.running)
    needText('steps.skip_reason', ending.steps.skip_reason)
  end
end

-- A workflow's steps still running end as told; those not started are skipped, with their StepSkipped.
local function closeSteps(how, ts)
  local fields = redis.call('HGETALL', steps)
  for i = 1, #fields, 2 do
    local id, status = fields[i], fields[i + 1]
    if not string.find(id, '|', 1, true) then
      if status == 'running' then
        redis.call('HSET', steps, id, how.running)
      elseif status == 'pending' then
        redis.call('HSET', steps, id, 'skipped')
        append('skipped|' .. id, cjson.encode({kind = 'StepSkipped', step_id = id, ts = ts, reason = how.skip_reason}))
      end
    end
  end
end

-- A thread run's ending: a completed run's staged messages go onto the thread; the active run's
-- end starts the next waiting run that has not ended (its job is promoted by the ending process,
-- or runs when its delay is up); a waiting run's end takes it out of the line. The thread expires
-- the retention period after its last run ends.
local function endOnThread(ending, run_id, tag)
  local thread_id = redis.call('HGET', record, 'thread_id')
  if not thread_id then return end
  local thread = tag .. '{{THREAD_KEY_INFIX}}' .. thread_id
  local staged = record .. '{{THREAD_STAGED_SUFFIX}}'
  if ending.status == 'completed' then
    local messages = redis.call('LRANGE', staged, 0, -1)
    -- Messages steered in after the run's last call (no call took them) follow its answer.
    local taken = tonumber(redis.call('HGET', record, 'injected_taken') or '0')
    for _, json in ipairs(redis.call('LRANGE', record .. '{{THREAD_INJECTED_SUFFIX}}', taken, -1)) do messages[#messages + 1] = json end
    for i = 1, #messages, 1000 do
      redis.call('RPUSH', thread, unpack(messages, i, math.min(i + 999, #messages)))
    end
    -- The run state it leaves is the thread's; none ('[]', nothing set) leaves the thread none.
    local state = redis.call('HGET', record, 'thread_state')
    if state == '[]' then redis.call('DEL', thread .. ':state') elseif state then redis.call('SET', thread .. ':state', state) end
  end
  redis.call('DEL', staged)
  if redis.call('GET', thread .. ':active') == run_id then
    redis.call('DEL', thread .. ':active')
    while true do
      local next_id = redis.call('LPOP', thread .. ':waiting')
      if not next_id then break end
      local status = redis.call('HGET', tag .. ':run:' .. next_id, 'status')
      if status and not isTerminal(status) then
        redis.call('SET', thread .. ':active', next_id)
        break
      end
    end
  else
    redis.call('LREM', thread .. ':waiting', 0, run_id)
  end
  if redis.call('EXISTS', thread .. ':active') == 0 then
    for _, key in ipairs({thread, thread .. ':runs', thread .. ':waiting', thread .. ':state'}) do redis.call('EXPIRE', key, ending.retention_seconds) end
  end
end

-- What a run's metrics name it by, for the process that ended it (SPEC §18), and its parent run
-- if it is a child (SPEC §13), whose call its end settles: {created_at, agent, workflow, parent_run_id}.
local function runFacts()
  return redis.call('HMGET', record, 'created_at', 'agent', 'workflow', 'parent_run_id')
end

local function finish(ending)
  local closed = {}
  if ending.closing then
    local fields = redis.call('HGETALL', pending)
    local counts = {}
    for i = 1, #fields, 2 do counts[fields[i]] = fields[i + 1] end
    for i = 1, #fields, 2 do
      local step, n = string.match(fields[i], '^(.*)|(%d+)|calls$')
      if step and tonumber(counts[roundField(step, n)] or '0') > 0 then
        local results = roundKey(step, 'results', n)
        for _, call in ipairs(cjson.decode(fields[i + 1])) do
          if redis.call('HSETNX', results, call[1], ending.closing.content) == 1 then
            closed[#closed + 1] = cjson.encode({step_id = step, iteration = tonumber(n), tool_call_id = call[1], tool_name = call[2], definition_hash = call[3]})
            append('', cjson.encode({kind = 'ToolCallFailed', step_id = step, ts = ending.ts, iteration = tonumber(n),
              tool_name = call[2], tool_call_id = call[1], duration_ms = 0, error_code = ending.closing.code}))
            streamAdd({type = 'tool_result', step_id = step, iteration = tonumber(n), tool_call_id = call[1], status = 'failed'})
          end
        end
      end
    end
  end
  if ending.steps then closeSteps(ending.steps, ending.ts) end
  appendAll(ending.events)
  local usage = redis.call('HMGET', record, 'usage_input', 'usage_output', 'usage_total')
  local kinds = {completed = 'RunCompleted', failed = 'RunFailed', cancelled = 'RunCancelled'}
  local event = {kind = kinds[ending.status], step_id = ending.step_id, ts = ending.ts,
    usage = {input = tonumber(usage[1] or '0'), output = tonumber(usage[2] or '0'), total = tonumber(usage[3] or '0')}}
  if ending.status == 'failed' then event.error_code = ending.error_code end
  append('', cjson.encode(event))
  local fields = {'status', ending.status, 'finished_at', ending.ts}
  if ending.status == 'cancelled' and not ending.output then ending.output = streamedTextSoFar() end
  if ending.output then fields[#fields + 1] = 'output'; fields[#fields + 1] = ending.output end
  if ending.output_type then fields[#fields + 1] = 'output_type'; fields[#fields + 1] = ending.output_type end
  if ending.error then fields[#fields + 1] = 'error'; fields[#fields + 1] = ending.error end
  redis.call('HSET', record, unpack(fields))
  streamAdd({type = 'end', status = ending.status})
  -- The index lists itself (createRun puts it there), so this expires it too.
  for _, key in ipairs(redis.call('SMEMBERS', index)) do redis.call('EXPIRE', key, ending.retention_seconds) end
  local run_id, active, tag = runIdentity()
  -- The deployment's runs ended, by agent (or workflow) and status, counted once here (SPEC §18).
  local workflow = redis.call('HGET', record, 'workflow')
  local counted = workflow and ('workflow|' .. workflow) or ('agent|' .. redis.call('HGET', record, 'agent'))
  redis.call('HINCRBY', tag .. '{{RUN_COUNTS_SUFFIX}}', counted .. '|' .. ending.status, 1)
  endOnThread(ending, run_id, tag)
  redis.call('ZREM', active, run_id)
  -- Waiting clients are told on the partition's channel (sharded: in this slot).
  redis.call('SPUBLISH', tag .. ':finished', run_id)
  return closed
end
