--[[
  Opens a workflow tool step's one call (tool_call_id = the step id) as round 1 of the step, once:
  its tool job settles it and enqueues the step's join.
  KEYS[1] record
  ARGV[1] step_id   ARGV[2] tool_name   ARGV[3] the tool's definition hash
  Returns {1} when opened now, {0, openInRound} when opened before, {-1} when the run has ended.
  Safe to run twice.
]]
--- @include "prelude"
local step, tool, definition = ARGV[1], ARGV[2], ARGV[3]
if #ARGV ~= 3 or step == '' or tool == '' or definition == '' then refuse('openToolStep takes a step_id, a tool_name and a definition hash') end

local status, ended = runStatus()
if ended then return {-1} end
local round = roundField(step, 1)
if redis.call('HEXISTS', pending, round) == 1 then return {0, openInRound(round)} end
redis.call('HSET', pending, round, 1, round .. '|calls', cjson.encode({{step, tool, definition}}))
redis.call('SADD', index, pending, roundKey(step, 'results', 1), roundKey(step, 'spans', 1))
markRunning(status)
touch()
return {1}
