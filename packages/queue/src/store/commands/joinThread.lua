--[[
  Puts a new run on its thread (SPEC §11): the record names the thread (`thread_id`), and the
  thread's list of runs gets the run, once. The thread's keys stop expiring while it has a run
  to come (the ending of its last run sets their retention again, see finish).
  KEYS[1] record
  ARGV[1] thread_id
  Returns 1 when the run joined now, 0 when it had joined (a resend).
  Safe to run twice.
]]
--- @include "prelude"
local thread_id = ARGV[1]
needText('thread_id', thread_id)
if redis.call('EXISTS', record) == 0 then refuse('joinThread: no run at ' .. record) end
local _, _, tag = runIdentity()
local thread = tag .. '{{THREAD_KEY_INFIX}}' .. thread_id
if redis.call('HSETNX', record, 'thread_id', thread_id) == 0 then return 0 end
local run_id = runIdentity()
redis.call('RPUSH', thread .. ':runs', run_id)
redis.call('PERSIST', thread)
redis.call('PERSIST', thread .. ':runs')
return 1
