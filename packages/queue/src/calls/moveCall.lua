--[[
  Moves provider call n of a step to its next try (SPEC §16): where it stands among its models
  (entry, failed tries at that entry, 429 waits), with the events of the try that failed. Only a
  failed provider call (or a provider's pause) moves a call; the next try reads it in loadStep.
  KEYS[1] record
  ARGV[1] msgpack map: step_id, iteration, position ('<entry>,<failures>,<waits>'), events ({dedupeId, json} pairs)
  Returns 1 when written, 0 when the run has ended. Safe to run twice (the position is absolute).
]]
--- @include "prelude"
local args = cmsgpack.unpack(ARGV[1])
needText('step_id', args.step_id)
needWhole('iteration', args.iteration)
if not isText(args.position) or not string.match(args.position, '^%d+,%d+,%d+$') then refuse('moveCall: position must be <entry>,<failures>,<waits>') end
needEvents('events', args.events)
local _, ended = runStatus()
if ended then return 0 end
redis.call('HSET', pending, tryField(args.step_id, args.iteration), args.position)
redis.call('SADD', index, pending)
appendAll(args.events)
return 1
