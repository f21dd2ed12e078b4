--[[
  A thread run's conversation so far (SPEC §11): the thread's messages as they were when the run
  first read them. The count read first is kept in the record (`thread_base`), so every delivery
  of the run's first call sees the same messages, and the run's own messages are those after them.
  KEYS[1] record
  Returns {} for a run on no thread; {thread_id, -1} for one whose turn has not come (another run
  of its thread is active); else {thread_id, base, message JSON …}.
  Safe to run twice.
]]
--- @include "prelude"
local fields = redis.call('HMGET', record, 'thread_id', 'thread_base')
local thread_id = fields[1]
if not thread_id then return {} end
local run_id, _, tag = runIdentity()
local thread = tag .. '{{THREAD_KEY_INFIX}}' .. thread_id
if redis.call('GET', thread .. ':active') ~= run_id then return {thread_id, -1} end
local base = tonumber(fields[2])
if not base then
  base = redis.call('LLEN', thread)
  redis.call('HSET', record, 'thread_base', base)
end
local reply = {thread_id, base}
if base > 0 then
  for _, json in ipairs(redis.call('LRANGE', thread, 0, base - 1)) do reply[#reply + 1] = json end
end
return reply
