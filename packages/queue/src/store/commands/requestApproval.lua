--[[
  A call that needs approval starts waiting, once: its request is kept (with the tool job that runs
  it if approved), the round counts it among its calls waiting for approval, ToolApprovalRequested
  is written, and the run waits if nothing else of the round is open.
  KEYS[1] record
  ARGV[1] msgpack map: step_id, iteration, tool_call_id, request (JSON), event (JSON)
  Returns {1} when the call starts waiting now, {0, status} when it was requested before (status:
  pending, approved, rejected or timed_out), {-1} when the run has ended. Safe to run twice.
]]
--- @include "prelude"
local args = cmsgpack.unpack(ARGV[1])
needText('step_id', args.step_id)
needWhole('iteration', args.iteration)
needText('tool_call_id', args.tool_call_id)
needText('request', args.request)
needText('event', args.event)

local _, ended = runStatus()
if ended then return {-1} end
local id, place = args.tool_call_id, args.step_id .. '|' .. args.iteration
if redis.call('HGET', approvals, id .. '|place') == place then return {0, redis.call('HGET', approvals, id .. '|status')} end
redis.call('HSET', approvals, id, args.request, id .. '|place', place, id .. '|status', 'pending')
redis.call('HDEL', approvals, id .. '|resolution')
local round = roundField(args.step_id, args.iteration)
redis.call('HINCRBY', pending, round .. '|awaiting', 1)
redis.call('SADD', index, approvals)
append('approval|' .. place .. '|' .. id, args.event)
waitingOrRunning(round, openInRound(round))
return {1}
