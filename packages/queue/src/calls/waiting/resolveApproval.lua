--[[
  Resolves a waiting call once: approved (its tool job runs it next), rejected, or timed out (both
  close the call with their result and ToolCallFailed, counting the round down). An approval or a
  rejection writes ToolApprovalResolved; a timeout does not. A call closed here gets its
  `tool_result` chunk on the run's stream (SPEC §12).
  KEYS[1] record
  ARGV[1] msgpack map: tool_call_id, decision ('approved' | 'rejected' | 'timed_out'),
        resolution (JSON), resolved ('' or ToolApprovalResolved JSON), content (for the model, when
        not approved), terminal ('' or ToolCallFailed JSON), code (its error_code)
  Returns {1, request, openInRound} when resolved now; {0, resolution, request} when resolved
  before (that resolution stands); {-1, request} when the run ended with the call still waiting;
  {-2} when the call never waited in this run. Safe to run twice.
]]
--- @include "prelude"
--- @include "stream"
local args = cmsgpack.unpack(ARGV[1])
local id, decision = args.tool_call_id, args.decision
needText('tool_call_id', id)
if decision ~= 'approved' and decision ~= 'rejected' and decision ~= 'timed_out' then refuse('decision must be approved, rejected or timed_out') end
needText('resolution', args.resolution)
needText('resolved', args.resolved)
needText('content', args.content)
needText('terminal', args.terminal)
needText('code', args.code)

local status = redis.call('HGET', approvals, id .. '|status')
if not status then
  -- A compacted run keeps its approvals in its record (see compactRun): it has ended, so nothing is written.
  local kept = redis.call('HGET', record, 'approvals')
  local archived = kept and cjson.decode(kept) or {}
  status = archived[id .. '|status']
  if not status then return {-2} end
  if status ~= 'pending' then return {0, archived[id .. '|resolution'], archived[id]} end
  return {-1, archived[id]}
end
local request = redis.call('HGET', approvals, id)
if status ~= 'pending' then return {0, redis.call('HGET', approvals, id .. '|resolution'), request} end
local _, ended = runStatus()
if ended then return {-1, request} end
redis.call('HSET', approvals, id .. '|status', decision, id .. '|resolution', args.resolution)
local step, n = string.match(redis.call('HGET', approvals, id .. '|place'), '^(.*)|(%d+)$')
local round = roundField(step, n)
redis.call('HINCRBY', pending, round .. '|awaiting', -1)
if args.resolved ~= '' then append('', args.resolved) end
local open = openInRound(round)
if decision ~= 'approved' then
  local results = roundKey(step, 'results', n)
  if redis.call('HSETNX', results, id, args.content) == 1 then
    redis.call('HSET', results, id .. '|error', args.code)
    open = redis.call('HINCRBY', pending, round, -1)
    append('', args.terminal)
    streamAdd({type = 'tool_result', step_id = step, iteration = tonumber(n), tool_call_id = id, status = 'failed'})
  end
end
-- Approved: its tool job comes next, so the run is running; otherwise it waits while only waiting calls are open.
if decision == 'approved' then
  if redis.call('HGET', record, 'status') == 'waiting' then redis.call('HSET', record, 'status', 'running') end
else
  waitingOrRunning(round, open)
end
touch()
return {1, request, open}
