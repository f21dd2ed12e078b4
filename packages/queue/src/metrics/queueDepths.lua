--[[
  The depth of some queues, for metrics (SPEC §18), in one step whatever their number.
  KEYS  four per queue, in this order: <queue>:wait, <queue>:prioritized, <queue>:active, <queue>:delayed
  ARGV  none
  Returns the counts, three per queue in the order of KEYS: waiting (wait + prioritized), active,
  delayed. Reads only.
]]
if #KEYS % 4 ~= 0 then return redis.error_reply('ERR queueDepths takes four keys per queue') end
local counts = {}
for i = 1, #KEYS, 4 do
  counts[#counts + 1] = redis.call('LLEN', KEYS[i]) + redis.call('ZCARD', KEYS[i + 1])
  counts[#counts + 1] = redis.call('LLEN', KEYS[i + 2])
  counts[#counts + 1] = redis.call('ZCARD', KEYS[i + 3])
end
return counts
