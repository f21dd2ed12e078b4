--[[
  Stages a thread run's conversation before the write that completes it: that write (see finish)
  copies it onto the thread, so it is appended once, and only by a run that completes. What is
  staged is where the conversation is, not the messages: `ranges` of the step's transcript list
  (its input, assistant turns and tool results, without arcflow's notes), then the final answer,
  so the completing iteration sends Redis only what is new. A later staging replaces an earlier one.
  The run state it leaves (SPEC §17) is staged too (the record's `thread_state`): finish keeps it
  as the thread's state, which the thread's next run given no state starts from.
  KEYS[1] record
  ARGV[1] msgpack map: ranges (flat list of from, to: transcript positions, to excluded, ascending),
          answer (the final answer's message JSON), state (the run state as a JSON list of changes)
  Returns 1 when staged; 0 when the run is on no thread, gone or ended (nothing written).
  Safe to run twice.
]]
--- @include "prelude"
local args = cmsgpack.unpack(ARGV[1])
if type(args.ranges) ~= 'table' or #args.ranges % 2 ~= 0 then refuse('stageThreadMessages: ranges must be a list of from, to pairs') end
local held, last = redis.call('LLEN', transcriptKey('s1')), 0
local ranges = {}
for i = 1, #args.ranges, 2 do
  local from, to = args.ranges[i], args.ranges[i + 1]
  needWhole('ranges[]', from)
  needWhole('ranges[]', to)
  if from < last or to <= from or to > held then refuse('stageThreadMessages: range ' .. from .. ':' .. to .. ' is not within the transcript (' .. held .. ' messages) in order') end
  last = to
  ranges[#ranges + 1] = from .. ':' .. to
end
needText('answer', args.answer)
needText('state', args.state)
local _, ended = runStatus()
if ended or not redis.call('HGET', record, 'thread_id') then return 0 end
redis.call('HSET', record, 'thread_ranges', table.concat(ranges, ','), 'thread_answer', args.answer, 'thread_state', args.state)
return 1
