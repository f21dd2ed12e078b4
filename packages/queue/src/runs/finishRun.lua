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
local closed = finish(args)
return {1, closed, runFacts()}
