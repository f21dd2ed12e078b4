--[[
  Claims the emission of an ended run's root span, once: the record's field `root_span`, so the
  claim expires with the run and adds no key of its own. A claim made the earlier way (the run's
  `:root-span` key) counts too. The first caller gets what the span is made of, read in the same
  step (the record keeps these fields after compaction too).
  KEYS[1] record
  Returns, for the first caller only, the record's trace, agent, workflow, created_at, status,
  usage_input, usage_output, error and finished_at (nil where unset); 0 after, and for a run that
  is gone.
]]
--- @include "prelude"
if redis.call('EXISTS', record) == 0 then return 0 end
if redis.call('EXISTS', record .. '{{RUN_KEY_SUFFIX.rootSpan}}') == 1 then return 0 end
if redis.call('HSETNX', record, 'root_span', '1') == 0 then return 0 end
return redis.call('HMGET', record, 'trace', 'agent', 'workflow', 'created_at', 'status', 'usage_input', 'usage_output', 'error', 'finished_at')
