--[[
  Stages a thread run's messages (its input, assistant turns, tool results and final answer)
  before the write that completes it: that write (see finish) moves them onto the thread, so they
  are appended once, and only by a run that completes. A later staging replaces an earlier one.
  The run state it leaves (SPEC §17) is staged too (the record's `thread_state`): finish keeps it
  as the thread's state, which the thread's next run given no state starts from.
  KEYS[1] record
  ARGV[1] msgpack map: messages (list of message JSON), state (the run state as a JSON list of changes)
  Returns 1 when staged; 0 when the run is on no thread, gone or ended (nothing written).
  Safe to run twice.
]]
--- @include "prelude"
local args = cmsgpack.unpack(ARGV[1])
if type(args.messages) ~= 'table' then refuse('stageThreadMessages: messages must be a list') end
for _, json in ipairs(args.messages) do needText('messages[]', json) end
needText('state', args.state)
local _, ended = runStatus()
if ended or not redis.call('HGET', record, 'thread_id') then return 0 end
local staged = record .. '{{THREAD_STAGED_SUFFIX}}'
redis.call('DEL', staged)
for i = 1, #args.messages, 1000 do
  redis.call('RPUSH', staged, unpack(args.messages, i, math.min(i + 999, #args.messages)))
end
redis.call('SADD', index, staged)
redis.call('HSET', record, 'thread_state', args.state)
return 1
