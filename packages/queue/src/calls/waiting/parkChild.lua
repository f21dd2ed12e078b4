--[[
  A call that started a child run (SPEC §13) waits for it, once: the round counts it among the
  calls waiting outside, so that a run whose every open call waits outside leaves the watchdog's
  scan (settleWaiting, in the prelude). recordToolResult counts it down when the child's end settles it.
  KEYS[1] record
  ARGV[1] step_id   ARGV[2] iteration   ARGV[3] tool_call_id
  Returns 1 when counted now, 0 when counted before, closed already, or the run has ended. Safe
  to run twice.
]]
--- @include "prelude"
local step_id, iteration, tool_call_id = ARGV[1], wholeArg('iteration', ARGV[2]), ARGV[3]
if #ARGV ~= 3 then refuse('parkChild takes 3 arguments') end
if tool_call_id == '' then refuse('tool_call_id must not be empty') end

local _, ended = runStatus()
if ended then return 0 end
if redis.call('HEXISTS', roundKey(step_id, 'results', iteration), tool_call_id) == 1 then return 0 end
local round = roundField(step_id, iteration)
if redis.call('HSETNX', pending, round .. '|child|' .. tool_call_id, 1) == 0 then return 0 end
redis.call('HINCRBY', pending, round .. '|children', 1)
waitingOrRunning(round)
return 1
