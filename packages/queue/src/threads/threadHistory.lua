--[[
  Where a thread run's conversation so far is (SPEC §11): the first `base` messages of its
  thread's list, as long as the list was when the run first asked. `base` is kept in the record
  (`thread_base`), with the thread's first run (`thread_origin`, which tells this thread from an
  earlier one of the same id that was deleted), so every delivery of the run's first call sees the
  same messages, and the run's own messages are those after them. The messages themselves are
  read by the caller (a worker reads only those it has not cached: the list's first messages never
  change).
  A run given no state at enqueue (no `state_given`) starts from the state the thread's last
  completed run left (SPEC §17: the thread's `:state`, put there by finish), recorded as its first
  state log entry here, once.
  A line whose active run ended without handing on (its record gone) is handed on here, to the
  first of its runs that has not ended.
  KEYS[1] record
  Returns {} for a run on no thread; {thread_id, -1} for one whose turn has not come (another run
  of its thread is active); else {thread_id, base, origin, state log length}.
  Safe to run twice.
]]
--- @include "prelude"
local fields = redis.call('HMGET', record, 'thread_id', 'thread_base', 'thread_origin', 'state_given')
local thread_id = fields[1]
if not thread_id then return {} end
local run_id, _, tag = runIdentity()
local thread = tag .. '{{THREAD_KEY_INFIX}}' .. thread_id
local current = redis.call('GET', thread .. ':active')
if current ~= run_id then
  -- Its turn has not come, unless the line's active run ended without handing on (its record
  -- gone): then the first run of the line that has not ended takes the turn.
  local status = current and redis.call('HGET', tag .. ':run:' .. current, 'status')
  if status and not isTerminal(status) then return {thread_id, -1} end
  local next_id
  repeat
    next_id = redis.call('LPOP', thread .. ':waiting')
    local next_status = next_id and redis.call('HGET', tag .. ':run:' .. next_id, 'status')
  until not next_id or (next_status and not isTerminal(next_status))
  if next_id then redis.call('SET', thread .. ':active', next_id) else redis.call('DEL', thread .. ':active') end
  if next_id ~= run_id then return {thread_id, -1} end
end
local base, origin = tonumber(fields[2]), fields[3]
if not base then
  base = redis.call('LLEN', thread)
  origin = redis.call('LINDEX', thread .. ':runs', 0) or run_id
  redis.call('HSET', record, 'thread_base', base, 'thread_origin', origin)
  local inherited = redis.call('GET', thread .. ':state')
  local log = stateLogKey('s1')
  if inherited and not fields[4] and redis.call('LLEN', log) == 0 then
    redis.call('RPUSH', log, inherited)
    redis.call('SADD', index, log)
  end
end
return {thread_id, base, origin, redis.call('LLEN', stateLogKey('s1'))}
