--[[
  Puts a new run on its thread (SPEC §11), after createRun and before any job of it is added: the
  record names the thread (`thread_id`), the thread's list of runs gets the run, and the thread's
  one-active-run rule decides (the thread's `:active` run id and `:waiting` list, in order):
    the thread is free (no active run, or it has ended): the run is active now        -> 'start'
    busy, on_busy 'queue': the run waits, queued, behind the others                    -> 'wait'
    busy, on_busy 'reject': the run is removed again (record, events, index entries)  -> 'busy'
    busy, on_busy 'steer': the input's messages go to the active run's `:injected`
      list (its next call takes them; `:injected-by` names this run beside each), and
      the run ends at once, completed, with `steered_into` naming the active run        -> 'steered'
  A run that waits holds no job: the write that ends the run before it makes it active (see
  finish), and the process that made that write adds its first job, as `thread_job` says.
  KEYS[1] record
  ARGV[1] msgpack map: thread_id, on_busy, messages (the input's messages, JSON each),
          ts (ms), retention_seconds; job? (JSON {queue, attempts}: the run's first job, kept as
          the record's `thread_job`); follow_up_trace? (trace JSON) for the run that takes this
          steering run's messages if its target ends without them reaching the thread (see finish)
  Returns {decision, active run id or ''}; a resend returns the first call's decision.
  Safe to run twice.
]]
--- @include "prelude"
--- @include "stream"
--- @include "finish"
local args = cmsgpack.unpack(ARGV[1])
needText('thread_id', args.thread_id)
needText('on_busy', args.on_busy)
if args.on_busy ~= 'queue' and args.on_busy ~= 'steer' and args.on_busy ~= 'reject' then refuse('on_busy must be queue, steer or reject') end
if type(args.messages) ~= 'table' then refuse('messages must be a list') end
for _, json in ipairs(args.messages) do needText('messages[]', json) end
needWhole('ts', args.ts)
needWhole('retention_seconds', args.retention_seconds)
if args.job ~= nil then needText('job', args.job) end
if args.follow_up_trace ~= nil then needText('follow_up_trace', args.follow_up_trace) end
local run_id, active, tag = runIdentity()
local thread = tag .. '{{THREAD_KEY_INFIX}}' .. args.thread_id
local fields = redis.call('HMGET', record, 'status', 'thread_join', 'steered_into', 'agent')
if not fields[1] then
  -- Gone: removed by an earlier 'busy' answer to this same call.
  return {'busy', redis.call('GET', thread .. ':active') or ''}
end
if fields[2] then return {fields[2], fields[3] or redis.call('GET', thread .. ':active') or ''} end

-- The active run, unless it has ended (or is gone): then the thread is free.
local current = redis.call('GET', thread .. ':active')
if current then
  local status = redis.call('HGET', tag .. ':run:' .. current, 'status')
  if (not status) or isTerminal(status) then current = nil end
end

if current and args.on_busy == 'reject' then
  for _, key in ipairs(redis.call('SMEMBERS', index)) do redis.call('DEL', key) end
  redis.call('DEL', record)
  redis.call('ZREM', active, run_id)
  redis.call('ZREM', tag .. '{{RUNS_INDEX_SUFFIX}}', run_id)
  redis.call('ZREM', tag .. '{{RUNS_INDEX_SUFFIX}}:agent:' .. fields[4], run_id)
  return {'busy', current}
end

redis.call('HSET', record, 'thread_id', args.thread_id)
if args.job then redis.call('HSET', record, 'thread_job', args.job) end
redis.call('RPUSH', thread .. ':runs', run_id)
for _, key in ipairs({thread, thread .. ':runs', thread .. ':active', thread .. ':waiting', thread .. ':state'}) do redis.call('PERSIST', key) end

if not current then
  redis.call('SET', thread .. ':active', run_id)
  redis.call('HSET', record, 'thread_join', 'start')
  return {'start', run_id}
end
if args.on_busy == 'queue' then
  redis.call('RPUSH', thread .. ':waiting', run_id)
  redis.call('HSET', record, 'thread_join', 'wait')
  return {'wait', current}
end
-- steer: the active run's next call takes these messages (see takeInjected).
local target = tag .. ':run:' .. current
local injected, by = target .. '{{THREAD_INJECTED_SUFFIX}}', target .. '{{THREAD_INJECTED_BY_SUFFIX}}'
if #args.messages > 0 then
  redis.call('RPUSH', injected, unpack(args.messages))
  local ids = {}
  for i = 1, #args.messages do ids[i] = run_id end
  redis.call('RPUSH', by, unpack(ids))
end
redis.call('SADD', target .. '{{RUN_KEY_SUFFIX.index}}', injected, by)
redis.call('HSET', record, 'thread_join', 'steered', 'steered_into', current)
if args.follow_up_trace then redis.call('HSET', record, 'follow_up_trace', args.follow_up_trace) end
finish({status = 'completed', step_id = 's1', ts = args.ts, output = '', retention_seconds = args.retention_seconds, events = {}})
return {'steered', current}
