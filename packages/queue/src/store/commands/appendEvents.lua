--[[
  Appends events unless the run has ended.
  KEYS[1] record
  args: events ({dedupeId, json} pairs)
  Returns 1 when appended, 0 when the run has ended. Safe to run twice for events with a dedupe id.
]]
--- @include "prelude"
needEvents('events', args.events)
local _, ended = runStatus()
if ended then return 0 end
appendAll(args.events)
return 1
