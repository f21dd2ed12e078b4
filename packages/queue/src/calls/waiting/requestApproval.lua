--[[
  A call that needs approval starts waiting, once: its request is kept (with the tool job that runs
  it if approved), the round counts it among its calls waiting for approval, ToolApprovalRequested
  is written, and the run waits if nothing else of the round is open.
  KEYS[1] record
  ARGV[1] msgpack map: step_id, iteration, tool_call_id, request (JSON), event (JSON)
  Returns {1} when the call starts waiting now, {0, status} when it was requested before (status:
  pending, approved, rejected or timed_out) or is closed already (status: closed), {-1} when the
  run has ended, {-2} when another call of the run waits under the same id (approvals are
  addressed by id: this one cannot wait too). Safe to run twice.
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
local waitingAt = redis.call('HGET', approvals, id .. '|place')
if waitingAt == place then return {0, redis.call('HGET', approvals, id .. '|status')} end
if redis.call('HEXISTS', roundKey(args.step_id, 'results', args.iteration), id) == 1 then return {0, 'closed'} end
if waitingAt and redis.call('HGET', approvals, id .. '|status') == 'pending' then return {-2} end
redis.call('HSET', approvals, id, args.request, id .. '|place', place, id .. '|status', 'pending')
redis.call('HDEL', approvals, id .. '|resolution')
local round = roundField(args.step_id, args.iteration)
redis.call('HINCRBY', pending, round .. '|awaiting', 1)
redis.call('SADD', index, approvals)
append('approval|' .. place .. '|' .. id, args.event)
waitingOrRunning(round, openInRound(round))
return {1}
