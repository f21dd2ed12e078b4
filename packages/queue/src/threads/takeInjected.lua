--[[
  The messages steered into a thread's active run (see joinThread) that call `iteration` of its
  step takes: those not taken by an earlier call. What a call took is kept in the record
  (`injected|<step>|<n>`: from and to), so every delivery of the call takes the same ones — none
  included: a call that found none keeps that, so a message steered in between two of its
  deliveries goes to the next call instead of to a delivery whose state may not stand.
  KEYS[1] record
  ARGV[1] step_id   ARGV[2] iteration
  Returns the messages' JSON (empty when there are none, or the run is on no thread).
  Safe to run twice.
]]
--- @include "prelude"
local step_id = ARGV[1]
local iteration = wholeArg('iteration', ARGV[2])
needText('step_id', step_id)
local injected = record .. '{{THREAD_INJECTED_SUFFIX}}'
local field = 'injected|' .. step_id .. '|' .. iteration
local taken = redis.call('HGET', record, field)
local from, to
if taken then
  from, to = string.match(taken, '^(%d+):(%d+)$')
  from, to = tonumber(from), tonumber(to)
else
  from = tonumber(redis.call('HGET', record, 'injected_taken') or '0')
  to = redis.call('LLEN', injected)
  local _, ended = runStatus()
  if ended then return {} end
  redis.call('HSET', record, field, from .. ':' .. to, 'injected_taken', to)
end
if to <= from then return {} end
return redis.call('LRANGE', injected, from, to - 1)
