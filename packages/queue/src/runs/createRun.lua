--[[
  Creates a run: its record, its RunEnqueued event, its place in the active set, and its entries
  in the listing indexes (every run, and the agent's runs), scored by creation time.
  KEYS[1] record   KEYS[2] idempotency key
  ARGV[1] msgpack map: run_id, use_idempotency (boolean), fields (map of the record's fields),
          enqueued (event JSON); a workflow run adds steps ({step_id, status} pairs in graph
          order, the roots 'running') and started ({dedupeId, json} pairs: the roots' StepStarted);
          a run given an initial state (SPEC §17) adds state_entry (its changes, JSON) and
          state_step (the step whose state log it begins); a fork (SPEC §15, see runs/fork.ts)
          adds fork: rounds ({step_id, iteration, response, has_calls, results, changes}: the source's
          recorded rounds it replays, results and changes as flat field/value lists), thread_id and
          thread_messages (a new thread, begun with these messages), retry_of (a retry: the source
          run's record key, in this run's slot, which gets retried_by once), outputs (a workflow fork:
          the kept steps' outputs, as a flat field/value list; their status in steps is 'completed')
  Returns {1, run_id} when created now; {0, run_id} when the run exists (a resend of this call)
  or the idempotency key names an earlier run (that run's id), or a retry's source has a retry
  already (that retry's id).
  Safe to run twice.
]]
--- @include "prelude"
local args = cmsgpack.unpack(ARGV[1])
local run_id, active, tag = runIdentity()
if run_id ~= args.run_id then refuse('createRun: the record key does not name run ' .. tostring(args.run_id)) end
if type(args.fields) ~= 'table' then refuse('createRun: fields must be a map') end
for field, value in pairs(args.fields) do
  if not isText(field) or not isText(value) then refuse('createRun: fields must map text to text') end
end
needText('enqueued', args.enqueued)
needText('fields.agent', args.fields.agent)
if args.steps ~= nil then
  if type(args.steps) ~= 'table' then refuse('createRun: steps must be a list') end
  for _, pair in ipairs(args.steps) do
    if type(pair) ~= 'table' or not isText(pair[1]) or not isText(pair[2]) then refuse('createRun: steps must hold {step_id, status} pairs') end
  end
  needEvents('started', args.started)
end
if args.state_entry ~= nil then
  needText('state_entry', args.state_entry)
  needText('state_step', args.state_step)
end
local fork = args.fork
if fork ~= nil then
  if type(fork) ~= 'table' or type(fork.rounds) ~= 'table' then refuse('createRun: fork.rounds must be a list') end
  for _, round in ipairs(fork.rounds) do
    needText('fork.rounds[].step_id', round.step_id)
    needWhole('fork.rounds[].iteration', round.iteration)
    needText('fork.rounds[].response', round.response)
    if type(round.results) ~= 'table' or type(round.changes) ~= 'table' then refuse('createRun: a fork round needs results and changes lists') end
  end
  if fork.thread_id ~= nil then
    needText('fork.thread_id', fork.thread_id)
    if type(fork.thread_messages) ~= 'table' then refuse('createRun: fork.thread_messages must be a list') end
  end
  if fork.retry_of ~= nil then needText('fork.retry_of', fork.retry_of) end
  if fork.outputs ~= nil and type(fork.outputs) ~= 'table' then refuse('createRun: fork.outputs must be a list') end
end

if redis.call('EXISTS', record) == 1 then return {0, run_id} end
-- A run is retried once (SPEC §15): a retry of a run that has one answers with that one.
if fork and fork.retry_of then
  local retry = redis.call('HGET', fork.retry_of, 'retried_by')
  if retry then return {0, retry} end
end
if args.use_idempotency then
  local existing = redis.call('GET', KEYS[2])
  if existing then return {0, existing} end
  redis.call('SET', KEYS[2], run_id)
  redis.call('SADD', index, KEYS[2])
end
local fields = {}
for field, value in pairs(args.fields) do fields[#fields + 1] = field; fields[#fields + 1] = value end
redis.call('HSET', record, unpack(fields))
redis.call('SADD', index, record, events, dedupe, index)
append('', args.enqueued)
local now = serverMs()
if args.steps then
  local created = args.fields.created_at
  for _, pair in ipairs(args.steps) do
    redis.call('HSET', steps, pair[1], pair[2])
    if pair[2] == 'running' then redis.call('HSET', steps, pair[1] .. '|t0', created) end
  end
  redis.call('SADD', index, steps, outputs)
  appendAll(args.started)
end
if args.state_entry then
  local log = stateLogKey(args.state_step)
  redis.call('RPUSH', log, args.state_entry)
  redis.call('SADD', index, log)
end
if fork then
  -- The source's rounds, replayed by the loop without a model call or a tool execution.
  for _, round in ipairs(fork.rounds) do
    local response = roundKey(round.step_id, 'response', round.iteration)
    redis.call('SET', response, round.response)
    local indexed = {response}
    if round.has_calls then
      local results = roundKey(round.step_id, 'results', round.iteration)
      if #round.results > 0 then redis.call('HSET', results, unpack(round.results)) end
      indexed[#indexed + 1] = results
      indexed[#indexed + 1] = roundKey(round.step_id, 'spans', round.iteration)
    end
    if #round.changes > 0 then
      local changes = roundKey(round.step_id, 'changes', round.iteration)
      redis.call('HSET', changes, unpack(round.changes))
      indexed[#indexed + 1] = changes
    end
    redis.call('SADD', index, unpack(indexed))
  end
  if fork.thread_id then
    local thread, messages = tag .. '{{THREAD_KEY_INFIX}}' .. fork.thread_id, fork.thread_messages
    -- In slices, within Lua's limit on unpacked values.
    for i = 1, #messages, 1000 do redis.call('RPUSH', thread, unpack(messages, i, math.min(i + 999, #messages))) end
  end
  if fork.retry_of then redis.call('HSET', fork.retry_of, 'retried_by', run_id) end
  if fork.outputs and #fork.outputs > 0 then redis.call('HSET', outputs, unpack(fork.outputs)) end
end
redis.call('ZADD', active, now, run_id)
local created = tonumber(args.fields.created_at) or now
redis.call('ZADD', tag .. '{{RUNS_INDEX_SUFFIX}}', created, run_id)
redis.call('ZADD', tag .. '{{RUNS_INDEX_SUFFIX}}:agent:' .. args.fields.agent, created, run_id)
return {1, run_id}
