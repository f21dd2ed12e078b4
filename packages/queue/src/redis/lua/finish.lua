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
  that completes appends its conversation to the thread here, in the write that completes it,
  so once; the active run's end hands the thread on (see endOnThread). The run's stream gets its `end` chunk
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

-- RPUSHes a list of values, in slices within Lua's limit on unpacked values.
local function pushAll(key, values)
  for i = 1, #values, 1000 do redis.call('RPUSH', key, unpack(values, i, math.min(i + 999, #values))) end
end

-- A completed thread run's conversation onto its thread: the ranges of its transcript list that
-- stageThreadMessages named (its own messages after the instructions, without arcflow's notes),
-- then its answer; copied here, so the completing write sends none of them again. A staging by an
-- earlier version sent the messages themselves (the staged list).
local function appendConversation(thread, staged)
  local fields = redis.call('HMGET', record, 'thread_ranges', 'thread_answer')
  if not fields[1] then
    pushAll(thread, redis.call('LRANGE', staged, 0, -1))
    return
  end
  local transcript = transcriptKey('s1')
  for from, to in string.gmatch(fields[1], '(%d+):(%d+)') do
    pushAll(thread, redis.call('LRANGE', transcript, tonumber(from), tonumber(to) - 1))
  end
  redis.call('RPUSH', thread, fields[2])
end

-- Messages steered into the thread's active run that do not reach the thread with it (it failed or
-- was cancelled, whether or not a call took them; or it answered before a call took them) become
-- the input of a new run of the thread (`<run_id>-steered`), of the first steering run's agent,
-- tenant and priority, with `steered_from` naming the steering runs, streaming as the first
-- steering run asked (SPEC §12). Its input is every such message: it may be larger than one
-- enqueue's limit, and is read back whatever its size.
-- Returns its id, or nil when there are none.
local function steeredFollowUp(ending, run_id, tag, thread_id)
  local from = 0
  if ending.status == 'completed' then from = tonumber(redis.call('HGET', record, 'injected_taken') or '0') end
  local messages = redis.call('LRANGE', record .. '{{THREAD_INJECTED_SUFFIX}}', from, -1)
  if #messages == 0 then return nil end
  local steering, seen = {}, {}
  for _, id in ipairs(redis.call('LRANGE', record .. '{{THREAD_INJECTED_BY_SUFFIX}}', from, -1)) do
    if not seen[id] then seen[id] = true; steering[#steering + 1] = id end
  end
  local names = {'agent', 'config', 'exec_config', 'definition_hash', 'follow_up_trace', 'thread_job', 'stream', 'tenant', 'priority', 'enqueued_by'}
  local source = redis.call('HMGET', tag .. ':run:' .. (steering[1] or run_id), unpack(names))
  -- The steering run's record gone (it expired): the target's agent and settings.
  if not source[1] then source = redis.call('HMGET', record, unpack(names)) end
  local id = run_id .. '-steered'
  local new = tag .. ':run:' .. id
  if redis.call('EXISTS', new) == 1 then return nil end
  local fields = {run_id = id, status = 'queued', agent = source[1], input = '[' .. table.concat(messages, ',') .. ']',
    input_kind = 'messages', config = source[2] or 'null', exec_config = source[3] or 'null', trace = source[5] or '{}',
    definition_hash = source[4] or '', created_at = tostring(ending.ts), usage_input = '0', usage_output = '0',
    usage_total = '0', iterations = '0', thread_id = thread_id, thread_join = 'start'}
  if #steering > 0 then fields.steered_from = cjson.encode(steering) end
  if source[6] then fields.thread_job = source[6] end
  if source[7] then fields.stream = source[7] end
  -- Whose it is (SPEC §14, §19): the steering run's tenant, priority and enqueuer.
  if source[8] then fields.tenant = source[8] end
  if source[9] then fields.priority = source[9] end
  if source[10] then fields.enqueued_by = source[10] end
  local flat = {}
  for field, value in pairs(fields) do flat[#flat + 1] = field; flat[#flat + 1] = value end
  redis.call('HSET', new, unpack(flat))
  local newIndex = new .. '{{RUN_KEY_SUFFIX.index}}'
  redis.call('SADD', newIndex, new, new .. '{{RUN_KEY_SUFFIX.events}}', new .. '{{RUN_KEY_SUFFIX.dedupe}}', newIndex)
  redis.call('RPUSH', new .. '{{RUN_KEY_SUFFIX.events}}', cjson.encode({kind = 'RunEnqueued', step_id = 's1', agent = source[1], ts = ending.ts}))
  redis.call('ZADD', tag .. '{{ACTIVE_RUNS_SUFFIX}}', serverMs(), id)
  redis.call('ZADD', tag .. '{{RUNS_INDEX_SUFFIX}}', ending.ts, id)
  redis.call('ZADD', tag .. '{{RUNS_INDEX_SUFFIX}}:agent:' .. source[1], ending.ts, id)
  return id
end

-- A thread run's ending: a completed run's conversation goes onto the thread; the active run's end
-- puts the run taking its steered input not on the thread (if any) at the front of the line, and
-- makes the first run of the line that has not ended active, in this write (the ending process adds
-- that run's first job: see `startNextOnThread`; the watchdog, if that process died first); a
-- waiting run's end takes it out of the line. The thread expires the retention period after its
-- last run ends.
local function endOnThread(ending, run_id, tag)
  local thread_id = redis.call('HGET', record, 'thread_id')
  if not thread_id then return end
  local thread = tag .. '{{THREAD_KEY_INFIX}}' .. thread_id
  local staged = record .. '{{THREAD_STAGED_SUFFIX}}'
  if ending.status == 'completed' then
    appendConversation(thread, staged)
    -- The run state it leaves is the thread's; none ('[]', nothing set) leaves the thread none.
    local state = redis.call('HGET', record, 'thread_state')
    if state == '[]' then redis.call('DEL', thread .. ':state') elseif state then redis.call('SET', thread .. ':state', state) end
  end
  redis.call('DEL', staged)
  redis.call('HDEL', record, 'thread_ranges', 'thread_answer')
  if redis.call('GET', thread .. ':active') == run_id then
    redis.call('DEL', thread .. ':active')
    local follow = steeredFollowUp(ending, run_id, tag, thread_id)
    if follow then
      redis.call('RPUSH', thread .. ':runs', follow)
      redis.call('LPUSH', thread .. ':waiting', follow)
    end
    while true do
      local next_id = redis.call('LPOP', thread .. ':waiting')
      if not next_id then break end
      local status = redis.call('HGET', tag .. ':run:' .. next_id, 'status')
      if status and not isTerminal(status) then
        redis.call('SET', thread .. ':active', next_id)
        -- Its quiet time counts from now (the watchdog starts it if its job is never added).
        redis.call('ZADD', tag .. '{{ACTIVE_RUNS_SUFFIX}}', 'XX', serverMs(), next_id)
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
-- if it is a child (SPEC §13), whose call its end settles, and its tenant (SPEC §14):
-- {created_at, agent, workflow, parent_run_id, tenant}.
local function runFacts()
  return redis.call('HMGET', record, 'created_at', 'agent', 'workflow', 'parent_run_id', 'tenant')
end

-- Deletes `key` when another process left a value of another type there (see finishRun).
local function clearForeign(key, kind)
  local found = redis.call('TYPE', key).ok
  if found ~= 'none' and found ~= kind then redis.call('DEL', key) end
end

-- A round's stored calls ({tool_call_id, tool_name, definition_hash} lists); none when another process wrote something else.
local function storedCalls(text)
  local ok, calls = pcall(cjson.decode, text)
  if not ok or type(calls) ~= 'table' then return {} end
  local valid = {}
  for _, call in ipairs(calls) do
    if type(call) == 'table' and isText(call[1]) and isText(call[2]) then valid[#valid + 1] = call end
  end
  return valid
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
        clearForeign(results, 'hash')
        for _, call in ipairs(storedCalls(fields[i + 1])) do
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
  -- The deployment's runs ended, by agent (or workflow), status and tenant, counted once here (SPEC §18).
  local named = redis.call('HMGET', record, 'workflow', 'agent', 'tenant')
  local counted = named[1] and ('workflow|' .. named[1]) or ('agent|' .. (named[2] or ''))
  local tenant = (named[3] and named[3] ~= 'default') and ('|' .. named[3]) or ''
  redis.call('HINCRBY', tag .. '{{RUN_COUNTS_SUFFIX}}', counted .. '|' .. ending.status .. tenant, 1)
  endOnThread(ending, run_id, tag)
  -- A child run (SPEC §13) stays in the scan until its parent's call is settled (settleParentCall
  -- takes it out): its parent, waiting only for children, is not scanned, so a process that dies
  -- between this end and the settle leaves the watchdog the child to find.
  if redis.call('HEXISTS', record, 'parent_call') == 1 then redis.call('ZADD', active, 'XX', serverMs(), run_id) else redis.call('ZREM', active, run_id) end
  -- Compacted next by the process that ended it, or else by the sweep (runs/compaction-sweep.ts).
  redis.call('ZADD', tag .. '{{UNCOMPACTED_RUNS_SUFFIX}}', serverMs(), run_id)
  -- Waiting clients are told on the partition's channel (sharded: in this slot).
  redis.call('SPUBLISH', tag .. ':finished', run_id)
  return closed
end
