--[[
  Writes a call's ToolCallStarted (once per dedupe id) unless its result is recorded or the run
  has ended.
  KEYS[1] record
  ARGV[1] step_id   ARGV[2] iteration   ARGV[3] tool_call_id   ARGV[4] once (dedupe id)
  ARGV[5] started (event JSON)
  Returns {1} when the call should run, {0, openInRound, joined} when its result is already recorded
  (joined: the place recordToolResult gave the round's join, when the round is settled; else ''),
  {-1} when the run has ended. Safe to run twice.
]]
--- @include "prelude"
local step_id, iteration, tool_call_id, once, started = ARGV[1], wholeArg('iteration', ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
if #ARGV ~= 5 then refuse('startToolCall takes 5 arguments') end
if tool_call_id == '' or started == '' then refuse('tool_call_id and started must not be empty') end

if redis.call('HEXISTS', roundKey(step_id, 'results', iteration), tool_call_id) == 1 then
  local round = roundField(step_id, iteration)
  local open = openInRound(round)
  return {0, open, open == 0 and redis.call('HGET', pending, round .. '|joined') or ''}
end
local _, ended = runStatus()
if ended then return {-1} end
append(once, started)
return {1}
