--[[
  Ends one step of a workflow run, once: its status, its output or error, its last events, then
  its StepCompleted (with duration_ms from the step's start) when it completed. The first step
  to fail is remembered as '|first_failed'.
  KEYS[1] record
  ARGV[1] msgpack map: step_id, status ('completed' | 'failed'), output?, error? (JSON), ts,
        events ({dedupeId, json} pairs), completed? (StepCompleted JSON without duration_ms),
        state_changes? (a completed step's run-state changes, SPEC §17: one entry appended to the
        run's state log, the log of step 'run'), state_at (with state_changes: the entries of that
        log the caller's check that the state stays within max_state_bytes was made on; the step's
        entry is that index, kept as '<step>|state_at')
  Returns {1, steps} when this call ended the step, {0, steps} when it had ended already (steps:
  the steps hash as field/value pairs, after the write), {-1} when the run has ended, {-2} when
  the run's state log has entries the caller's check did not see (nothing is written).
  Safe to run twice.
]]
--- @include "prelude"
local args = cmsgpack.unpack(ARGV[1])
local step = args.step_id
needText('step_id', step)
if args.status ~= 'completed' and args.status ~= 'failed' then refuse('settleStep: status must be completed or failed') end
needWhole('ts', args.ts)
needEvents('events', args.events)
if args.output ~= nil then needText('output', args.output) end
if args.error ~= nil then needText('error', args.error) end
if args.completed ~= nil then needText('completed', args.completed) end
if args.state_changes ~= nil and args.status == 'completed' then
  needText('state_changes', args.state_changes)
  needWhole('state_at', args.state_at)
end

local status, ended = runStatus()
if ended then return {-1} end
if redis.call('HGET', steps, step) ~= 'running' then return {0, redis.call('HGETALL', steps)} end
local log = stateLogKey('run')
local applies = args.state_changes and args.status == 'completed'
-- The limit holds whatever the parallelism: the caller checked the changes against the state as it stands.
if applies and redis.call('LLEN', log) ~= args.state_at then return {-2} end
redis.call('HSET', steps, step, args.status)
if args.output then redis.call('HSET', outputs, step, args.output) end
if applies then
  redis.call('RPUSH', log, args.state_changes)
  redis.call('SADD', index, log)
  -- Which entry is the step's: a fork that runs the step again leaves it out (SPEC §17).
  redis.call('HSET', steps, step .. '|state_at', args.state_at)
end
if args.error then
  redis.call('HSET', outputs, step .. '|error', args.error)
  redis.call('HSETNX', steps, '|first_failed', step)
end
markRunning(status)
appendAll(args.events)
if args.completed then
  local event = cjson.decode(args.completed)
  event.duration_ms = math.max(0, args.ts - tonumber(redis.call('HGET', steps, step .. '|t0') or args.ts))
  append('completed|' .. step, cjson.encode(event))
end
touch()
-- A step's end may leave only steps whose calls wait outside: the run waits now (its scan follows).
settleWaiting(step)
return {1, redis.call('HGETALL', steps)}
