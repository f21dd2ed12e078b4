--[[
  Replaces a call's hold (reserveCost.lua) by its true cost, once: the run's and the tenant's day's
  held amounts go down by the hold, the day's spend up by the cost. A hold settled already, or
  none, changes nothing. Amounts are whole micro-dollars.
  KEYS[1] the run's holds   ARGV[1] hold   ARGV[2] cost (0 releases a call that was never answered)
  ARGV[3] ttl (s) of the day it is settled against (the one the hold was taken on)
  Returns 1 when settled now, else 0.
]]
local holds, hold, cost, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if not (cost and ttl) or cost < 0 or ttl < 1 then return redis.error_reply('settleCost: cost and ttl must be whole numbers') end
local existing = redis.call('HGET', holds, hold)
if not existing or existing == 's' then return 0 end
local held, day = string.match(existing, '^(%d+)|(.+)$')
redis.call('HINCRBY', holds, 'held', -tonumber(held))
redis.call('HSET', holds, hold, 's')
redis.call('HINCRBY', day, 'held', -tonumber(held))
redis.call('HINCRBY', day, 'spent', cost)
redis.call('EXPIRE', day, ttl)
return 1
