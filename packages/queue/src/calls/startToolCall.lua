--[[
  Writes a call's ToolCallStarted (once per dedupe id) unless its result is recorded or the run
  has ended.
  KEYS[1] record
  ARGV[1] step_id   ARGV[2] iteration   ARGV[3] tool_call_id   ARGV[4] once (dedupe id)
  ARGV[5] started (event JSON)
  Returns {1} when the call should run, {0, openInRound} when its result is already recorded,
  {-1} when the run has ended. Safe to run twice.
]]
--- @include "prelude"
local step_id, iteration, tool_call_id, once, started = ARGV[1], wholeArg('iteration', ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
if #ARGV ~= 5 then refuse('startToolCall takes 5 arguments') end
if tool_call_id == '' or started == '' then refuse('tool_call_id and started must not be empty') end

if redis.call('HEXISTS', roundKey(step_id, 'results', iteration), tool_call_id) == 1 then
  return {0, openInRound(roundField(step_id, iteration))}
end
local _, ended = runStatus()
if ended then return {-1} end
append(once, started)
return {1}
