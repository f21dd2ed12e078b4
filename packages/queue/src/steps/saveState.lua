--[[
  Compare-and-set of a step's state, with its new messages appended to the step's transcript and
  events appended, only when the state was saved (and the run has not ended); mark_running moves
  a queued run to running.
  KEYS[1] record
  ARGV[1] msgpack map: step_id, expected (stored iterations to compare with; -1: none yet), iterations,
        json (the state without its messages, format 4), count (how many messages the state has),
        from (the place in the transcript of the first message sent), messages (the state's
        messages from `from` on, one JSON each), mark_running (boolean), events ({dedupeId, json} pairs)
  The transcript is only appended to: messages the list already holds (sent again, by a save whose
  reply was lost, or from a worker that had fewer cached) are skipped, so it holds each message once.
  Returns 1 when saved, 0 when the stored state is not at `expected` (another delivery saved
  first; a resend of this call), -1 when the run has ended.
]]
--- @include "prelude"
local args = cmsgpack.unpack(ARGV[1])
needText('step_id', args.step_id)
if type(args.expected) ~= 'number' or args.expected ~= math.floor(args.expected) or args.expected < -1 then refuse('expected must be a whole number >= -1') end
needWhole('iterations', args.iterations)
needText('json', args.json)
needWhole('count', args.count)
needWhole('from', args.from)
if type(args.messages) ~= 'table' then refuse('messages must be a list') end
for _, message in ipairs(args.messages) do needText('messages[]', message) end
if args.from + #args.messages ~= args.count then refuse('from + #messages must be count') end
needEvents('events', args.events)
if args.state_entry ~= nil then
  needText('state_entry', args.state_entry)
  needWhole('state_at', args.state_at)
end

local status, ended = runStatus()
if ended then return -1 end
local state = stateKey(args.step_id)
local current = tonumber(redis.call('HGET', state, 'iterations') or '-1')
if current ~= args.expected then return 0 end
local transcript = transcriptKey(args.step_id)
local stored = redis.call('LLEN', transcript)
-- The stored state's messages are the list; the new state's begin with them, so the list may hold
-- more than `from` (skipped) but never fewer (the sender lacks messages between: nothing is written).
if stored < args.from or stored > args.count then refuse('the transcript holds ' .. stored .. ' messages; from ' .. args.from .. ', count ' .. args.count) end
local stateLog, logged = stateLogKey(args.step_id), 0
if args.state_entry then
  logged = redis.call('LLEN', stateLog)
  if logged ~= args.state_at then refuse('the state log holds ' .. logged .. ' entries; state_at ' .. args.state_at) end
end
redis.call('HSET', state, 'iterations', args.iterations, 'json', args.json)
if current == -1 then redis.call('SADD', index, state) end
if stored < args.count then
  if stored == 0 then redis.call('SADD', index, transcript) end
  -- In slices, within Lua's limit on unpacked values.
  local first = stored - args.from + 1
  while first <= #args.messages do
    local last = math.min(first + 999, #args.messages)
    redis.call('RPUSH', transcript, unpack(args.messages, first, last))
    first = last + 1
  end
end
if args.state_entry then
  -- Appended once: the compare-and-set above lets one save of each iteration through.
  redis.call('RPUSH', stateLog, args.state_entry)
  if logged == 0 then redis.call('SADD', index, stateLog) end
end
if args.mark_running and status == 'queued' then redis.call('HSET', record, 'status', 'running') end
appendAll(args.events)
return 1
