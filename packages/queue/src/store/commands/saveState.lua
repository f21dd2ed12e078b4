--[[
  Compare-and-set of a step's state, with events appended only when the state was saved (and the
  run has not ended); mark_running moves a queued run to running.
  KEYS[1] record
  ARGV[1] msgpack map: step_id, expected (stored iterations to compare with; -1: none yet), iterations,
        json (the state), mark_running (boolean), events ({dedupeId, json} pairs)
  Returns 1 when saved, 0 when the stored state is not at `expected` (another delivery saved
  first; a resend of this call), -1 when the run has ended.
]]
--- @include "prelude"
local args = cmsgpack.unpack(ARGV[1])
needText('step_id', args.step_id)
if type(args.expected) ~= 'number' or args.expected ~= math.floor(args.expected) or args.expected < -1 then refuse('expected must be a whole number >= -1') end
needWhole('iterations', args.iterations)
needText('json', args.json)
needEvents('events', args.events)

local status, ended = runStatus()
if ended then return -1 end
local state = stateKey(args.step_id)
local current = tonumber(redis.call('HGET', state, 'iterations') or '-1')
if current ~= args.expected then return 0 end
redis.call('HSET', state, 'iterations', args.iterations, 'json', args.json)
if current == -1 then redis.call('SADD', index, state) end
if args.mark_running and status == 'queued' then redis.call('HSET', record, 'status', 'running') end
appendAll(args.events)
return 1
