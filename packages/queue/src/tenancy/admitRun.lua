--[[
  Admits a run among its tenant's active runs (SPEC §14 `max_active_runs`): a run admitted once
  stays admitted (a re-delivered first job is admitted again), another is admitted while the
  tenant has fewer than `limit`.
  KEYS[1] the tenant's active runs (a set of run ids)
  ARGV[1] run_id   ARGV[2] limit
  Returns 1 when admitted; else 0 (the run waits).
]]
local active, run_id, limit = KEYS[1], ARGV[1], tonumber(ARGV[2])
if redis.call('SISMEMBER', active, run_id) == 1 then return 1 end
if redis.call('SCARD', active) >= limit then return 0 end
redis.call('SADD', active, run_id)
return 1
