--[[
  Reserves a provider call's worst case (SPEC §14) against its run's max_cost_usd and its
  tenant's budget of the day, in one step, before the call is made. The hold is the call's
  (`<step>|<iteration>`), so every try, retry and re-delivery of the call reuses it: a hold is
  only ever raised (a later try of a dearer model), never taken twice. Amounts are whole micro-dollars.
  KEYS[1] the run's holds (hash: `held` = the sum held for its calls in flight; `<step>|<n>` =
          '<amount>|<tenant day key>' while held, 's' once settled)
  KEYS[2] the tenant's day (hash: `spent` settled, `held` in flight; lives `ttl` seconds)
  ARGV[1] hold   ARGV[2] amount   ARGV[3] the run's cap (-1: none)   ARGV[4] what the run has
  spent (its record's, child runs included)   ARGV[5] the tenant's cap of the day (-1: none)   ARGV[6] ttl (s)
  Returns {1} when held (or held already at least as much), {2} when the call is settled already,
  {0, 'run', used} or {0, 'tenant', used} when the worst case does not fit (nothing written).
]]
local holds, hold = KEYS[1], ARGV[1]
local amount, run_cap, run_spent = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tenant_cap, ttl = tonumber(ARGV[5]), tonumber(ARGV[6])
if not (amount and run_cap and run_spent and tenant_cap and ttl) or amount < 0 or ttl < 1 then
  return redis.error_reply('reserveCost: amount, caps, spent and ttl must be numbers')
end
local day, previous = KEYS[2], 0
local existing = redis.call('HGET', holds, hold)
if existing == 's' then return {2} end
if existing then
  local held, key = string.match(existing, '^(%d+)|(.+)$')
  previous, day = tonumber(held), key
end
local more = amount - previous
if more <= 0 then return {1} end
if run_cap >= 0 then
  local used = run_spent + tonumber(redis.call('HGET', holds, 'held') or '0') - previous
  if used + amount > run_cap then return {0, 'run', used} end
end
if tenant_cap >= 0 then
  local state = redis.call('HMGET', day, 'spent', 'held')
  local used = tonumber(state[1] or '0') + tonumber(state[2] or '0') - previous
  if used + amount > tenant_cap then return {0, 'tenant', used} end
end
redis.call('HINCRBY', holds, 'held', more)
redis.call('HSET', holds, hold, amount .. '|' .. day)
redis.call('HINCRBY', day, 'held', more)
redis.call('EXPIRE', holds, ttl)
redis.call('EXPIRE', day, ttl)
return {1}
