--[[
  Settles a waiting call once (SPEC §10, §20). An approval is approved (its tool job, or its wait
  for a result, comes next), rejected or timed out; a result is answered or timed out. All but an
  approval close the call with their result and terminal event, counting the round down, with the
  state changes a deferred handler made (kept for the join, as a completed call's are). A
  person's decision writes ToolApprovalResolved; a timeout does not. A call closed here gets its
  `tool_result` chunk on the run's stream (SPEC §12). A run that no longer waits is back in the
  watchdog's scan from now.
  KEYS[1] record
  ARGV[1] msgpack map: kind ('approval' | 'result'), tool_call_id, decision ('approved' |
        'rejected' | 'timed_out' | 'answered'), resolution (JSON), resolved ('' or
        ToolApprovalResolved JSON), content (for the model, when the call closes), terminal ('' or
        the terminal event's JSON), code (its error_code; '' when the call completed), changes
        ('' or the call's run-state changes, a JSON list)
  Returns {1, request, openInRound} when settled now; {0, resolution, request, status} when settled
  before (that settlement stands); {-1, request} when the run ended with the call still waiting;
  {-2} when the call never waited for this in this run. Safe to run twice. A compacted run's
  waits are read from its record (keptWaitsField), as settled before or the run ended.
]]
--- @include "prelude"
--- @include "stream"
local args = cmsgpack.unpack(ARGV[1])
local kind, id, decision = args.kind, args.tool_call_id, args.decision
if kind ~= 'approval' and kind ~= 'result' then refuse('kind must be approval or result') end
needText('tool_call_id', id)
if decision ~= 'approved' and decision ~= 'rejected' and decision ~= 'timed_out' and decision ~= 'answered' then
  refuse('decision must be approved, rejected, timed_out or answered')
end
needText('resolution', args.resolution)
needText('resolved', args.resolved)
needText('content', args.content)
needText('terminal', args.terminal)
needText('code', args.code)
needText('changes', args.changes)

local waits = waitsOf(kind)
local status = redis.call('HGET', waits, id .. '|status')
if not status then
  -- A compacted run keeps its waits in its record (see compactRun): it has ended, so nothing is written.
  local kept = redis.call('HGET', record, keptWaitsField(kind))
  local archived = kept and cjson.decode(kept) or {}
  status = archived[id .. '|status']
  if not status then return {-2} end
  if status ~= 'pending' then return {0, archived[id .. '|resolution'], archived[id], status} end
  return {-1, archived[id]}
end
local request = redis.call('HGET', waits, id)
if status ~= 'pending' then return {0, redis.call('HGET', waits, id .. '|resolution'), request, status} end
local _, ended = runStatus()
if ended then return {-1, request} end
-- Where the call waits, read before anything is written: a wait another process left without it is refused whole.
local step, n = string.match(redis.call('HGET', waits, id .. '|place') or '', '^(.*)|(%d+)$')
if not step then refuse('the wait of call ' .. id .. ' has no place (step|iteration): it was not written by arcflow') end
redis.call('HSET', waits, id .. '|status', decision, id .. '|resolution', args.resolution)
local round = roundField(step, n)
redis.call('HINCRBY', pending, round .. '|awaiting', -1)
if args.resolved ~= '' then append('', args.resolved) end
local open = openInRound(round)
if decision ~= 'approved' then
  local results = roundKey(step, 'results', n)
  if redis.call('HSETNX', results, id, args.content) == 1 then
    if args.code ~= '' then redis.call('HSET', results, id .. '|error', args.code) end
    if args.changes ~= '' then
      local changed = roundKey(step, 'changes', n)
      redis.call('HSET', changed, id, args.changes)
      redis.call('SADD', index, changed)
    end
    open = redis.call('HINCRBY', pending, round, -1)
    append('', args.terminal)
    streamAdd({type = 'tool_result', step_id = step, iteration = tonumber(n), tool_call_id = id, status = args.code == '' and 'completed' or 'failed'})
  end
end
-- Approved: what comes next (its tool job, or its wait for a result) is written by the caller, so the run is running now.
if decision == 'approved' then
  if redis.call('HGET', record, 'status') == 'waiting' then redis.call('HSET', record, 'status', 'running') end
  touch()
else
  waitingOrRunning(round)
end
return {1, request, open}
