--[[
  Ends a run once (see finish).
  KEYS[1] record
  ARGV[1] msgpack map: the ending (see finish)
  Returns {1, closedCalls, {created_at, agent, workflow}} when this call ended the run, {0} when it
  had ended already.
  Safe to run twice.
]]
--- @include "prelude"
local args = cmsgpack.unpack(ARGV[1])
--- @include "stream"
--- @include "finish"
checkEnding(args)
local _, ended = runStatus()
if ended then return {0} end
-- A key of the run that another process replaced with one of another type would stop the ending
-- halfway (a script's writes before an error stay): such a key is cleared first, so that every run
-- can end. The ending writes these; a round's results are checked as its calls are closed.
local kinds = {[events] = 'list', [dedupe] = 'set', [pending] = 'hash', [steps] = 'hash', [index] = 'set', [stream] = 'stream', [streamMeta] = 'hash'}
for key, kind in pairs(kinds) do clearForeign(key, kind) end
local closed = finish(args)
return {1, closed, runFacts()}
