--[[
  The BullMQ priorities of jobs of one queue asked for on their own (tenancy/fair-batches.ts), in
  order: see redis/lua/fair.lua. The jobs a store script decides place themselves in that script
  (fairPlace); this call is for the others.
  KEYS[1] the queue's fair clock (`<job prefix>arcflow-fair`)
  KEYS[2] BullMQ's prioritized set of the queue (`<job prefix>prioritized`)
  ARGV[1] the queue's job key prefix
  ARGV[2..] each job as three arguments: tenant, level (1..10), stride (> 0); at most 1000 jobs
  Returns the jobs' priorities to add them with, in order (each 1 .. 2^21).
]]
--- @include "fair"
local jobs = (#ARGV - 1) / 3
if jobs < 1 or jobs > 1000 or jobs ~= math.floor(jobs) then
  return redis.error_reply('ERR arcflow: fairPriority takes a job prefix and 1 to 1000 (tenant, level, stride) triples')
end
local asks = {}
for i = 2, #ARGV, 3 do
  local level, stride = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local refusal = fairRefusal(level, stride)
  if refusal then return redis.error_reply('ERR arcflow: fairPriority: ' .. refusal) end
  asks[#asks + 1] = {ARGV[i], level, stride}
end
return fairPriorities(KEYS[1], KEYS[2], ARGV[1], asks)
