--[[
  Writes a call's ToolCallStarted (once per dedupe id) unless its result is recorded or the run
  has ended.
  KEYS[1] record
  args: step_id, iteration, tool_call_id, once (dedupe id), started (event JSON)
  Returns {1} when the call should run, {0, openInRound} when its result is already recorded,
  {-1} when the run has ended. Safe to run twice.
]]
--- @include "prelude"
needText('step_id', args.step_id)
needWhole('iteration', args.iteration)
needText('tool_call_id', args.tool_call_id)
needText('once', args.once)
needText('started', args.started)

if redis.call('HEXISTS', roundKey(args.step_id, 'results', args.iteration), args.tool_call_id) == 1 then
  return {0, openInRound(roundField(args.step_id, args.iteration))}
end
local _, ended = runStatus()
if ended then return {-1} end
append(args.once, args.started)
return {1}
