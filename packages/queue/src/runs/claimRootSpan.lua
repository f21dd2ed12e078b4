--[[
  Claims the emission of a run's root span, once: the record's field `root_span`, so the claim
  expires with the run and adds no key of its own. A claim made the earlier way (the run's
  `:root-span` key) counts too.
  KEYS[1] record
  Returns 1 for the first caller only; 0 after, and for a run that is gone.
]]
--- @include "prelude"
if redis.call('EXISTS', record) == 0 then return 0 end
if redis.call('EXISTS', record .. '{{RUN_KEY_SUFFIX.rootSpan}}') == 1 then return 0 end
return redis.call('HSETNX', record, 'root_span', '1')
