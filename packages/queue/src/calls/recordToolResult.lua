--[[
  Records a call's result with its terminal event, once; a fanned-out call is closed with it: its
  round's open count goes down by one. A ToolCallStarted not written before the handler ran goes
  in just before the terminal event. The results and spans keys are in the run's index already
  (put there with the round's response).
  KEYS[1] record
  ARGV[1] step_id      ARGV[2] iteration   ARGV[3] tool_call_id   ARGV[4] content
  ARGV[5] fanned_out ('1' or '0')          ARGV[6] terminal (event JSON)
  ARGV[7] span (traceparent of the call's execute_tool span; '' when not traced)
  ARGV[8] started (ToolCallStarted JSON; '' when written already)
  ARGV[9] failure (the terminal event's error code, kept as field '<tool_call_id>|error' of the
          results; '' when the call completed)
  ARGV[10] round_waits ('1' when calls of the round wait for approval: the run may be left waiting)
  ARGV[11] changes (the completed call's run-state changes, a JSON list, SPEC §17; '' for none):
           kept in the round's `changes` hash with the result, in this same step, for the join
  ARGV[12] spend (a child run's call, SPEC §13: 'tokens tool_calls' the child and its own children
           spent, added to the run's children_tokens and children_tool_calls for its budget, then
           ' cost' in micro-dollars when they made priced calls (children_cost_micros, SPEC §14); '' for none)
  ARGV[13] seen (with changes: how many calls' changes of the round the caller found recorded when it
           checked that the state, with them and this call's, stays within max_state_bytes, SPEC §17)
  The call's `tool_result` chunk goes onto the run's stream (SPEC §12) when the result is recorded now.
  Returns {1, '', openInRound} when recorded now, {0, stored, openInRound} when already recorded,
  {-1} when the run ended first, {-2, changes} (the round's recorded changes, as field/value pairs)
  when calls of the round recorded changes the caller's check did not see: nothing is written, and
  the caller checks again with them. Safe to run twice.
]]
--- @include "prelude"
--- @include "stream"
local step_id, iteration, tool_call_id, content = ARGV[1], wholeArg('iteration', ARGV[2]), ARGV[3], ARGV[4]
local fanned_out, terminal, span, started, failure = ARGV[5] == '1', ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local round_waits, changes, spend, seen = ARGV[10] == '1', ARGV[11], ARGV[12], ARGV[13]
if #ARGV ~= 13 then refuse('recordToolResult takes 13 arguments') end
if changes ~= '' then seen = wholeArg('seen', seen) end
if tool_call_id == '' or terminal == '' then refuse('tool_call_id and terminal must not be empty') end

local results = roundKey(step_id, 'results', iteration)
local round = roundField(step_id, iteration)
local _, ended = runStatus()
if ended then
  local existing = redis.call('HGET', results, tool_call_id)
  if existing then return {0, existing, openInRound(round)} end
  return {-1}
end
local stored = redis.call('HGET', results, tool_call_id)
if stored then return {0, stored, openInRound(round)} end
local changed = roundKey(step_id, 'changes', iteration)
-- The limit holds whatever the parallelism: the caller's check saw every change recorded in the round.
if changes ~= '' and redis.call('HLEN', changed) ~= seen then return {-2, redis.call('HGETALL', changed)} end
redis.call('HSET', results, tool_call_id, content)
if failure ~= '' then redis.call('HSET', results, tool_call_id .. '|error', failure) end
if changes ~= '' then
  redis.call('HSET', changed, tool_call_id, changes)
  redis.call('SADD', index, changed)
end
if spend ~= '' then
  local tokens, calls, cost = string.match(spend, '^(%d+) (%d+)( ?%d*)$')
  if not tokens then refuse('spend must be two or three whole numbers') end
  redis.call('HINCRBY', record, 'children_tokens', tokens)
  redis.call('HINCRBY', record, 'children_tool_calls', calls)
  if cost ~= '' then redis.call('HINCRBY', record, 'children_cost_micros', tonumber(cost)) end
end
local open
if fanned_out then
  open = redis.call('HINCRBY', pending, round, -1)
  -- A child run's call no longer waits (parkChild counted it).
  local child = spend ~= '' and redis.call('HDEL', pending, round .. '|child|' .. tool_call_id) == 1
  if child then redis.call('HINCRBY', pending, round .. '|children', -1) end
  -- Only a round that has calls waiting outside (for approval, a result: a deferred call's is known only once it waits; a child run) can make the run wait.
  if open > 0 and (child or round_waits or redis.call('HEXISTS', pending, round .. '|awaiting') == 1 or redis.call('HEXISTS', pending, round .. '|children') == 1) then
    waitingOrRunning(round)
  end
else
  open = openInRound(round)
end
if span ~= '' then redis.call('HSET', roundKey(step_id, 'spans', iteration), tool_call_id, span) end
if started ~= '' then redis.call('RPUSH', events, started, terminal) else redis.call('RPUSH', events, terminal) end
tellFollowers()
streamAdd({type = 'tool_result', step_id = step_id, iteration = iteration, tool_call_id = tool_call_id, status = failure == '' and 'completed' or 'failed'})
return {1, '', open}
