--[[
  Everything a provider job reads, in one call.
  KEYS[1] record
  ARGV[1] step_id   ARGV[2] iteration   ARGV[3] cached (how many of the step's transcript
  messages the worker has; the list's first messages never change)
  Returns the record's fields (status, agent, input, config, exec_config, trace, definition_hash,
  input_kind, usage_total, tool_calls: the two what the whole run has spent; thread_id,
  thread_origin, thread_base: the thread conversation the run began on; children_tokens,
  children_tool_calls: what its child runs spent, SPEC §13; parent_run_id: a child run's parent;
  stream: '1' or '0' when the run was asked to stream or not to, SPEC §12; usage_cost_micros,
  children_cost_micros: what its priced calls and its child runs' cost, SPEC §14), the step's
  state JSON, responses iteration - 1 and iteration, and round iteration - 1's results and span
  links as flat field/value lists; then where the transcript's tail begins (`cached`, or 0 when
  the list is shorter than that) and the messages from there on; then round iteration - 1's
  run-state changes (SPEC §17), by call, how many entries the step's state log holds, and where
  call iteration stands among its models (`<entry>,<failures>,<waits>`; false before its first failed try);
  then how many of the step's first rounds a fork copied (the record's `copied|<step>`; false for none).
  Writes nothing.
]]
--- @include "prelude"
local step, n, cached = ARGV[1], wholeArg('iteration', ARGV[2]), wholeArg('cached', ARGV[3])
local previous = n > 1
local transcript = transcriptKey(step)
local from = cached
if from > 0 and redis.call('LLEN', transcript) < from then from = 0 end
return {
  redis.call('HMGET', record, 'status', 'agent', 'input', 'config', 'exec_config', 'trace', 'definition_hash', 'input_kind', 'usage_total', 'tool_calls', 'thread_id', 'thread_origin', 'thread_base', 'children_tokens', 'children_tool_calls', 'parent_run_id', 'stream', 'usage_cost_micros', 'children_cost_micros'),
  redis.call('HGET', stateKey(step), 'json'),
  previous and redis.call('GET', roundKey(step, 'response', n - 1)),
  redis.call('GET', roundKey(step, 'response', n)),
  previous and redis.call('HGETALL', roundKey(step, 'results', n - 1)) or {},
  previous and redis.call('HGETALL', roundKey(step, 'spans', n - 1)) or {},
  from,
  redis.call('LRANGE', transcript, from, -1),
  previous and redis.call('HGETALL', roundKey(step, 'changes', n - 1)) or {},
  redis.call('LLEN', stateLogKey(step)),
  redis.call('HGET', pending, tryField(step, n)),
  redis.call('HGET', record, 'copied|' .. step),
}
