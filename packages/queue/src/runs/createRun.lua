--[[
  Creates a run: its record, its RunEnqueued event, its place in the active set, and its entries
  in the listing indexes (every run, and the agent's runs), scored by creation time.
  KEYS[1] record   KEYS[2] idempotency key
  ARGV[1] msgpack map: run_id, use_idempotency (boolean), fields (map of the record's fields),
          enqueued (event JSON); a workflow run adds steps ({step_id, status} pairs in graph
          order, the roots 'running') and started ({dedupeId, json} pairs: the roots' StepStarted);
          a run given an initial state (SPEC §17) adds state_entry (its changes, JSON) and
          state_step (the step whose state log it begins)
  Returns {1, run_id} when created now; {0, run_id} when the run exists (a resend of this call)
  or the idempotency key names an earlier run (that run's id).
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

if redis.call('EXISTS', record) == 1 then return {0, run_id} end
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
redis.call('ZADD', active, now, run_id)
local created = tonumber(args.fields.created_at) or now
redis.call('ZADD', tag .. '{{RUNS_INDEX_SUFFIX}}', created, run_id)
redis.call('ZADD', tag .. '{{RUNS_INDEX_SUFFIX}}:agent:' .. args.fields.agent, created, run_id)
return {1, run_id}
