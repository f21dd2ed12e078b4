--[[
  Appends events unless the run has ended.
  KEYS[1] record
  ARGV[1] msgpack map: events ({dedupeId, json} pairs)
  Returns 1 when appended, 0 when the run has ended. Safe to run twice for events with a dedupe id.
]]
--- @include "prelude"
local args = cmsgpack.unpack(ARGV[1])
needEvents('events', args.events)
local _, ended = runStatus()
if ended then return 0 end
appendAll(args.events)
return 1
