--[[
  Records a call's result with its terminal event, once; a fanned-out call is closed with it: its
  round's open count goes down by one. A ToolCallStarted not written before the handler ran goes
  in just before the terminal event. The results and spans keys are in the run's index already
  (put there with the round's response).
  KEYS[1] record
  args: step_id, iteration, tool_call_id, content, fanned_out (boolean), terminal (event JSON),
        span (traceparent of the call's execute_tool span; absent when not traced),
        started (ToolCallStarted JSON; absent when written already)
  Returns {1, '', openInRound} when recorded now, {0, stored, openInRound} when already recorded,
  {-1} when the run ended first. Safe to run twice.
]]
--- @include "prelude"
needText('step_id', args.step_id)
needWhole('iteration', args.iteration)
needText('tool_call_id', args.tool_call_id)
needText('content', args.content)
needText('terminal', args.terminal)
if args.span ~= nil then needText('span', args.span) end
if args.started ~= nil then needText('started', args.started) end

local results = roundKey(args.step_id, 'results', args.iteration)
local round = roundField(args.step_id, args.iteration)
local _, ended = runStatus()
if ended then
  local existing = redis.call('HGET', results, args.tool_call_id)
  if existing then return {0, existing, openInRound(round)} end
  return {-1}
end
if redis.call('HSETNX', results, args.tool_call_id, args.content) == 0 then
  return {0, redis.call('HGET', results, args.tool_call_id), openInRound(round)}
end
local open
if args.fanned_out then open = redis.call('HINCRBY', pending, round, -1) else open = openInRound(round) end
if args.span then redis.call('HSET', roundKey(args.step_id, 'spans', args.iteration), args.tool_call_id, args.span) end
if args.started then redis.call('RPUSH', events, args.started, args.terminal) else redis.call('RPUSH', events, args.terminal) end
return {1, '', open}
