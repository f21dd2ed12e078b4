--[[
  Appends a batch of a provider call's text to the run's stream (see includes/stream.lua): one
  `text` chunk, after a `reset` when this attempt replaces one that had begun. Nothing is written
  once the run has ended (its `end` chunk stays last), once the iteration's response is recorded
  (a late attempt's text would not be the recorded one), or for an attempt older than the one shown.
  KEYS[1] record
  ARGV[1] step_id   ARGV[2] iteration   ARGV[3] attempt   ARGV[4] text
  Returns 1 when written, 0 when dropped.
]]
--- @include "prelude"
--- @include "stream"
local step, n, attempt, text = ARGV[1], wholeArg('iteration', ARGV[2]), wholeArg('attempt', ARGV[3]), ARGV[4]
if #ARGV ~= 4 then refuse('appendStream takes 4 arguments') end
if step == '' or text == '' then refuse('step_id and text must not be empty') end

local _, ended = runStatus()
if ended then return 0 end
if redis.call('EXISTS', roundKey(step, 'response', n)) == 1 then return 0 end
local shown = streamShown(step, n)
if attempt < shown then return 0 end
if attempt > shown then streamShow(step, n, attempt, shown) end
streamText(step, n, attempt, text)
return 1
