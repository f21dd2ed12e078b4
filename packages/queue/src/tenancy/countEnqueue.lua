--[[
  Counts an enqueue against its tenant's `runs_per_minute` (SPEC §14), in the current minute's
  window, unless the window is full.
  KEYS[1] the tenant's counter of this minute
  ARGV[1] limit   ARGV[2] how long the counter lives (seconds)
  Returns 1 when counted; else 0 (the enqueue is refused).
]]
local counter, limit, ttl = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local count = tonumber(redis.call('GET', counter) or '0')
if count >= limit then return 0 end
redis.call('INCR', counter)
if count == 0 then redis.call('EXPIRE', counter, ttl) end
return 1
