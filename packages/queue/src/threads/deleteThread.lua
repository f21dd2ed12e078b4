--[[
  Deletes a thread (SPEC §11): its messages, its list of runs, its line of waiting runs and the run
  state its last completed run left (SPEC §17); its
  runs stay, as runs. Refused while one of its runs is active (queued, running or waiting): that
  run reads the thread's messages it began on from the thread's list.
  KEYS[1] the thread's key (its messages; the others are named from it, as keys.ts names them)
  Returns {1} when deleted, {0} when there was no thread, {-1, active run id} when busy.
]]
local thread = KEYS[1]
local tag = string.match(thread, '^(.*){{THREAD_KEY_INFIX}}')
local active = redis.call('GET', thread .. ':active')
if active then
  local status = redis.call('HGET', tag .. ':run:' .. active, 'status')
  if status and status ~= 'completed' and status ~= 'failed' and status ~= 'cancelled' then return {-1, active} end
end
return {redis.call('DEL', thread, thread .. ':runs', thread .. ':active', thread .. ':waiting', thread .. ':state') > 0 and 1 or 0}
