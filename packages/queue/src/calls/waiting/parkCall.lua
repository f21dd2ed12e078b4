--[[
  A call starts waiting for something outside, once (SPEC §10, §20), holding no worker: `kind`
  approval (a person's answer) or result (a result from outside: an external tool's call, or a
  handler that deferred). Its request is kept in the kind's hash, the round counts it among its
  calls waiting outside, its event is written, and the run waits if nothing else of the round is
  open. A waiting run is off the watchdog's scan until the first timeout of its round is due. The
  run's stream (SPEC §12, §20) gets `chunk` when one is given: a pending approval's
  `tool_approval`, an external tool's `tool_input` (its arguments: those of no other tool).
  KEYS[1] record
  ARGV[1] msgpack map: kind ('approval' | 'result'), step_id, iteration, tool_call_id,
        request (JSON), event (JSON), expires_at (ms), chunk ('' or the stream chunk's JSON)
  Returns {1} when the call starts waiting now, {0, status} when it was asked before at this place
  (status: pending, or how it was settled) or is closed already (status: closed), {-1} when the run
  has ended, {-2} when another call of the run waits under the same id (waiting calls are
  addressed by id: this one cannot wait too). Safe to run twice.
]]
--- @include "prelude"
--- @include "stream"
local args = cmsgpack.unpack(ARGV[1])
local kind = args.kind
if kind ~= 'approval' and kind ~= 'result' then refuse('kind must be approval or result') end
needText('step_id', args.step_id)
needWhole('iteration', args.iteration)
needText('tool_call_id', args.tool_call_id)
needText('request', args.request)
needText('event', args.event)
needWhole('expires_at', args.expires_at)
needText('chunk', args.chunk)

local _, ended = runStatus()
if ended then return {-1} end
local waits = waitsOf(kind)
local id, place = args.tool_call_id, args.step_id .. '|' .. args.iteration
local waitingAt = redis.call('HGET', waits, id .. '|place')
if waitingAt == place then return {0, redis.call('HGET', waits, id .. '|status')} end
if redis.call('HEXISTS', roundKey(args.step_id, 'results', args.iteration), id) == 1 then return {0, 'closed'} end
if waitingAt and redis.call('HGET', waits, id .. '|status') == 'pending' then return {-2} end
redis.call('HSET', waits, id, args.request, id .. '|place', place, id .. '|status', 'pending')
redis.call('HDEL', waits, id .. '|resolution')
local round = roundField(args.step_id, args.iteration)
redis.call('HINCRBY', pending, round .. '|awaiting', 1)
local due = tonumber(redis.call('HGET', pending, round .. '|due') or '')
if not due or args.expires_at < due then redis.call('HSET', pending, round .. '|due', args.expires_at) end
redis.call('SADD', index, waits)
append(kind .. '|' .. place .. '|' .. id, args.event)
if args.chunk ~= '' then streamAddJson(args.chunk) end
waitingOrRunning(round)
return {1}
