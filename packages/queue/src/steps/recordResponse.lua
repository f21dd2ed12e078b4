--[[
  Records provider response n once, with its events and usage. When it asks for tool jobs, the
  round's count of open calls and the list of those calls are set in the same step (the call that
  brings the count to zero enqueues the join); its results and spans keys go into the run's index
  here, once. A response that ends the run ends it in the same step.
  KEYS[1] record
  ARGV[1] msgpack map: step_id, iteration, response (JSON), usage {input, output, total}, has_calls (boolean),
        events ({dedupeId, json} pairs), open_count, open_calls ('[[tool_call_id, tool_name, definition_hash], …]'
        or ''), tool_calls (how many calls of it will be executed: the run's count for its budget),
        ending (see finish; absent when the run goes on), stream (the response's part of the
        run's stream, see streamResponse in includes/stream.lua; absent for none), cost_micros (the
        call's cost when its model is priced, SPEC §14: added to the record's usage_cost_micros; absent for none),
        seen (the run's spend {tokens, tool_calls}, its children's included, that a decision to execute
        calls under a budget was taken against, SPEC §10; absent: no check)
  Returns {1} when recorded now ({1, '', {created_at, agent, workflow}} when it ended the run too),
  {0, stored} when an earlier delivery recorded it, {-1} when the run has ended, {-3, tokens,
  tool_calls} when the run's spend is no longer `seen` (another step recorded meanwhile): nothing is
  written, and the caller decides again against it. Safe to run twice.
]]
--- @include "prelude"
local args = cmsgpack.unpack(ARGV[1])
--- @include "stream"
--- @include "finish"
local step, n = args.step_id, args.iteration
needText('step_id', step)
needWhole('iteration', n)
needText('response', args.response)
if type(args.usage) ~= 'table' then refuse('recordResponse: usage must be a map') end
needWhole('usage.input', args.usage.input)
needWhole('usage.output', args.usage.output)
needWhole('usage.total', args.usage.total)
needEvents('events', args.events)
needWhole('open_count', args.open_count)
needText('open_calls', args.open_calls)
needWhole('tool_calls', args.tool_calls)
if args.ending ~= nil then checkEnding(args.ending) end
if args.stream ~= nil then checkStreamPart(args.stream) end
if args.cost_micros ~= nil then needWhole('cost_micros', args.cost_micros) end
if args.seen ~= nil then
  if type(args.seen) ~= 'table' then refuse('recordResponse: seen must be a map') end
  needWhole('seen.tokens', args.seen.tokens)
  needWhole('seen.tool_calls', args.seen.tool_calls)
end

local _, ended = runStatus()
if ended then return {-1} end
local response = roundKey(step, 'response', n)
local existing = redis.call('GET', response)
if existing then return {0, existing} end
if args.seen ~= nil then
  local now = redis.call('HMGET', record, 'usage_total', 'children_tokens', 'tool_calls', 'children_tool_calls')
  -- As the store reads a count (wholeCount): anything but a whole number >= 0 counts 0.
  local function count(value)
    local number = tonumber(value)
    return isWhole(number) and number or 0
  end
  local tokens = count(now[1]) + count(now[2])
  local calls = count(now[3]) + count(now[4])
  if tokens ~= args.seen.tokens or calls ~= args.seen.tool_calls then return {-3, tokens, calls} end
end
redis.call('SET', response, args.response)
redis.call('HINCRBY', record, 'usage_input', args.usage.input)
redis.call('HINCRBY', record, 'usage_output', args.usage.output)
redis.call('HINCRBY', record, 'usage_total', args.usage.total)
redis.call('HINCRBY', record, 'iterations', 1)
if args.cost_micros ~= nil then redis.call('HINCRBY', record, 'usage_cost_micros', args.cost_micros) end
if args.tool_calls > 0 then redis.call('HINCRBY', record, 'tool_calls', args.tool_calls) end
appendAll(args.events)
local indexed = {response}
if args.has_calls then indexed[#indexed + 1] = roundKey(step, 'results', n); indexed[#indexed + 1] = roundKey(step, 'spans', n) end
if args.open_count > 0 then
  local round = roundField(step, n)
  redis.call('HSET', pending, round, args.open_count, round .. '|calls', args.open_calls)
  indexed[#indexed + 1] = pending
end
redis.call('SADD', index, unpack(indexed))
if args.stream then streamResponse(step, n, args.stream) end
if args.ending then
  finish(args.ending)
  return {1, '', runFacts()}
end
touch()
return {1}
