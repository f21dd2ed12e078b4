--[[
  Pauses a provider's calls for every worker of the prefix (SPEC §16: a 429 pauses that provider
  only): its pause key lives `ms` milliseconds, by the server's clock. A pause only ever grows: a
  shorter one asked while a longer one holds changes nothing.
  KEYS[1] the provider's pause key
  ARGV[1] ms
  Returns how long the provider is paused from now, in ms.
]]
local ms = tonumber(ARGV[1])
if not ms or ms < 1 or ms ~= math.floor(ms) then return redis.error_reply('ERR arcflow: pauseProvider: ms must be a whole number >= 1') end
local left = redis.call('PTTL', KEYS[1])
if left >= ms then return left end
redis.call('SET', KEYS[1], '1', 'PX', ms)
return ms
