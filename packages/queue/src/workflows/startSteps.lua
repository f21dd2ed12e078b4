--[[
  Moves a workflow run's steps on: each step to start goes from pending to running (its start
  time kept) with its StepStarted; each step to skip goes from pending to skipped with its
  StepSkipped. A step no longer pending is left as it is (another process moved it first).
  KEYS[1] record
  ARGV[1] msgpack map: ts, start ({step_id, StepStarted JSON} pairs), skip ({step_id, StepSkipped JSON} pairs)
  Returns 1, or -1 when the run has ended. Safe to run twice.
]]
--- @include "prelude"
local args = cmsgpack.unpack(ARGV[1])
needWhole('ts', args.ts)
needEvents('start', args.start)
needEvents('skip', args.skip)

local status, ended = runStatus()
if ended then return -1 end
for _, pair in ipairs(args.skip) do
  if redis.call('HGET', steps, pair[1]) == 'pending' then
    redis.call('HSET', steps, pair[1], 'skipped')
    append('skipped|' .. pair[1], pair[2])
  end
end
for _, pair in ipairs(args.start) do
  if redis.call('HGET', steps, pair[1]) == 'pending' then
    redis.call('HSET', steps, pair[1], 'running', pair[1] .. '|t0', args.ts)
    append('started|' .. pair[1], pair[2])
  end
end
markRunning(status)
-- A step started beside steps whose calls wait: the run is running again.
if status == 'waiting' then settleWaiting(nil) end
touch()
return 1
