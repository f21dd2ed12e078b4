import { ACTIVE_RUNS_SUFFIX, RUN_KEY_SUFFIX } from '../keys.ts';

/**
 * The run store's Lua scripts. Each is one atomic step, so a record and its events are written
 * together or not at all, and a re-delivered job cannot write either twice.
 *
 * A script is sent the run's record key alone (KEYS[1]) and names the run's other keys from it,
 * as keys.ts does: every key of a run shares the record's hash tag, so they live in one slot, and
 * a call costs fewer bytes (about 300 per tool result) and less argument handling in Redis.
 *
 * Events are appended by `append` to a list that only grows: an event's `seq` is its position in
 * the list (gap-free by construction; the store adds it when it reads the log), and an event with
 * a dedupe id is written at most once per run.
 */
const PRELUDE = `
local record = KEYS[1]
-- The run's keys, named from its record key as keys.ts names them (RUN_KEY_SUFFIX, stateKey, roundKey).
local events, dedupe = record .. '${RUN_KEY_SUFFIX.events}', record .. '${RUN_KEY_SUFFIX.dedupe}'
local pending, index = record .. '${RUN_KEY_SUFFIX.pending}', record .. '${RUN_KEY_SUFFIX.index}'
local function stateKey(step) return record .. ':' .. step .. ':state' end
local function roundKey(step, kind, n) return record .. ':' .. step .. ':' .. kind .. ':' .. n end
-- A round's field in the pending hash (its open count); the round's fanned-out calls are in field .. '|calls'.
local function roundField(step, n) return step .. '|' .. n end
local function append(dedupeId, json)
  if dedupeId ~= '' and redis.call('SADD', dedupe, dedupeId) == 0 then return 0 end
  return redis.call('RPUSH', events, json)
end
-- The run's id, and the prefix's set of runs not ended yet, scored by when each last made
-- progress (server time, ms): the watchdog looks there for runs that stopped moving.
local tag, run_id = string.match(record, '^(.*):run:([^:]*)$')
local active = tag .. '${ACTIVE_RUNS_SUFFIX}'
local function serverMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function touch() redis.call('ZADD', active, 'XX', serverMs(), run_id) end
local function isTerminal(status)
  return status == 'completed' or status == 'failed' or status == 'cancelled'
end
-- The run's status, and whether the run is gone or has ended (then nothing more is written).
local function runStatus()
  local status = redis.call('HGET', record, 'status')
  return status, (not status) or isTerminal(status)
end
-- Calls of a round not settled yet (0 once all are, or when the round fanned nothing out).
local function openInRound(round)
  return tonumber(redis.call('HGET', pending, round) or '0')
end
local function appendPairs(from, count)
  for i = 0, count - 1 do append(ARGV[from + 2 * i], ARGV[from + 2 * i + 1]) end
end
`;

export interface ScriptDefinition {
  readonly numberOfKeys: number;
  readonly lua: string;
}

/**
 * Ending a run, shared by `finishRun` and `recordResponse`: step events, then the run's terminal
 * event with the usage summed in Redis. With a closing content (a cancel, or a run failed because
 * it stalled), it first closes every fanned-out call of a round still open that has no result yet
 * with that content and a `ToolCallFailed` of the closing code, and returns those calls (as JSON).
 * Every key of the run then gets the retention TTL and the run leaves the active set. Reads its
 * arguments from ARGV[at] on: status, step_id, ts, output, errorJson, errorCode, finishedChannel,
 * closingContent ('' to close nothing), retentionSeconds, closingCode, count, (dedupeId, json)…
 */
const FINISH = `
local function checkFinish(at)
  local status = ARGV[at]
  if status ~= 'completed' and status ~= 'failed' and status ~= 'cancelled' then return 'status must be completed, failed or cancelled' end
  if not string.match(ARGV[at + 2], '^%d+$') then return 'ts must be an integer' end
  if not string.match(ARGV[at + 8], '^%d+$') then return 'retentionSeconds must be an integer' end
  if not string.match(ARGV[at + 10], '^%d+$') then return 'count must be an integer' end
  return nil
end
local function finish(at)
  local status = ARGV[at]
  local ts = tonumber(ARGV[at + 2])
  local closed = {}
  if ARGV[at + 7] ~= '' then
    local fields = redis.call('HGETALL', pending)
    local counts = {}
    for i = 1, #fields, 2 do counts[fields[i]] = fields[i + 1] end
    for i = 1, #fields, 2 do
      local step, n = string.match(fields[i], '^(.*)|(%d+)|calls$')
      if step and tonumber(counts[roundField(step, n)] or '0') > 0 then
        local results = roundKey(step, 'results', n)
        for _, call in ipairs(cjson.decode(fields[i + 1])) do
          if redis.call('HSETNX', results, call[1], ARGV[at + 7]) == 1 then
            closed[#closed + 1] = cjson.encode({step_id = step, iteration = tonumber(n), tool_call_id = call[1], tool_name = call[2]})
            append('', cjson.encode({kind = 'ToolCallFailed', step_id = step, ts = ts, iteration = tonumber(n),
              tool_name = call[2], tool_call_id = call[1], duration_ms = 0, error_code = ARGV[at + 9]}))
          end
        end
      end
    end
  end
  appendPairs(at + 11, tonumber(ARGV[at + 10]))
  local usage = redis.call('HMGET', record, 'usage_input', 'usage_output', 'usage_total')
  local kinds = {completed = 'RunCompleted', failed = 'RunFailed', cancelled = 'RunCancelled'}
  local event = {kind = kinds[status], step_id = ARGV[at + 1], ts = ts,
    usage = {input = tonumber(usage[1] or '0'), output = tonumber(usage[2] or '0'), total = tonumber(usage[3] or '0')}}
  if status == 'failed' then event.error_code = ARGV[at + 5] end
  append('', cjson.encode(event))
  local fields = {'status', status, 'finished_at', ARGV[at + 2]}
  if ARGV[at + 3] ~= '' then fields[#fields + 1] = 'output'; fields[#fields + 1] = ARGV[at + 3] end
  if ARGV[at + 4] ~= '' then fields[#fields + 1] = 'error'; fields[#fields + 1] = ARGV[at + 4] end
  redis.call('HSET', record, unpack(fields))
  -- The index lists itself (createRun puts it there), so this expires it too.
  for _, key in ipairs(redis.call('SMEMBERS', index)) do redis.call('EXPIRE', key, ARGV[at + 8]) end
  redis.call('ZREM', active, run_id)
  redis.call('PUBLISH', ARGV[at + 6], run_id)
  return closed
end
`;

/**
 * KEYS: record, idempotency. ARGV: run_id, useIdempotency, fieldCount, fields…, eventJson.
 * Safe to run twice: a run whose record exists is returned as it is.
 */
const createRun: ScriptDefinition = {
  numberOfKeys: 2,
  lua: `${PRELUDE}
if run_id ~= ARGV[1] then return redis.error_reply('createRun: the record key does not name run ' .. ARGV[1]) end
if not string.match(ARGV[3], '^%d+$') then return redis.error_reply('createRun: fieldCount must be an integer') end
if redis.call('EXISTS', record) == 1 then return {0, ARGV[1]} end
if ARGV[2] == '1' then
  local existing = redis.call('GET', KEYS[2])
  if existing then return {0, existing} end
  redis.call('SET', KEYS[2], ARGV[1])
  redis.call('SADD', index, KEYS[2])
end
local n = tonumber(ARGV[3])
redis.call('HSET', record, unpack(ARGV, 4, 3 + 2 * n))
redis.call('SADD', index, record, events, dedupe, index)
append('', ARGV[4 + 2 * n])
redis.call('ZADD', active, serverMs(), run_id)
return {1, ARGV[1]}
`,
};

/**
 * Everything a provider job reads, in one call. KEYS: record. ARGV: step_id, iteration, '1' when
 * there is a previous round to read (not for call 1). Returns the record's fields, the state JSON,
 * responses `iteration - 1` and `iteration`, and the previous round's results and span links as
 * flat field/value lists.
 */
const loadStep: ScriptDefinition = {
  numberOfKeys: 1,
  lua: `${PRELUDE}
local step, n = ARGV[1], tonumber(ARGV[2])
local previous = ARGV[3] == '1'
return {
  redis.call('HMGET', record, 'status', 'agent', 'input', 'config', 'exec_config', 'trace'),
  redis.call('HGET', stateKey(step), 'json'),
  previous and redis.call('GET', roundKey(step, 'response', n - 1)),
  redis.call('GET', roundKey(step, 'response', n)),
  previous and redis.call('HGETALL', roundKey(step, 'results', n - 1)) or {},
  previous and redis.call('HGETALL', roundKey(step, 'spans', n - 1)) or {},
}
`,
};

/** KEYS: record. ARGV: count, (dedupeId, json)…  Refused once the run has ended. */
const appendEvents: ScriptDefinition = {
  numberOfKeys: 1,
  lua: `${PRELUDE}
if not string.match(ARGV[1], '^%d+$') then return redis.error_reply('appendEvents: count must be an integer') end
local _, ended = runStatus()
if ended then return 0 end
appendPairs(2, tonumber(ARGV[1]))
touch()
return 1
`,
};

/**
 * Records a provider response with its events and, when it asks for tool jobs, sets the round's
 * count of open calls and lists those calls, in the same step. The call that brings the count
 * to zero enqueues the join (provider job n+1). A response with tool calls puts its round's
 * results and spans keys in the run's index here, once, so recording a result need not. A
 * response that ends the run ends it in the same step, when FINISH's arguments follow (else one
 * empty argument does).
 * KEYS: record.
 * ARGV: step_id, iteration, responseJson, input, output, total, hasCalls ('1' or '0'), eventCount, (dedupeId, json)…,
 * openCount, callsJson ([[tool_call_id, tool_name], …], '' when none), FINISH's arguments or ''
 * Returns {1} when recorded now, {0, stored} when an earlier delivery recorded it, {-1} when the run ended.
 */
const recordResponse: ScriptDefinition = {
  numberOfKeys: 1,
  lua: `${PRELUDE}${FINISH}
local step, n = ARGV[1], ARGV[2]
for i = 4, 6 do
  if not string.match(ARGV[i], '^%d+$') then return redis.error_reply('recordResponse: token counts must be non-negative integers') end
end
if not string.match(n, '^%d+$') or not string.match(ARGV[8], '^%d+$') then return redis.error_reply('recordResponse: iteration and eventCount must be integers') end
local openAt = 9 + 2 * tonumber(ARGV[8])
if not string.match(ARGV[openAt] or '', '^%d+$') then return redis.error_reply('recordResponse: openCount must be an integer') end
if ARGV[openAt + 2] ~= '' then
  local problem = checkFinish(openAt + 2)
  if problem then return redis.error_reply('recordResponse: ' .. problem) end
end
local _, ended = runStatus()
if ended then return {-1} end
local response = roundKey(step, 'response', n)
local existing = redis.call('GET', response)
if existing then return {0, existing} end
redis.call('SET', response, ARGV[3])
redis.call('HINCRBY', record, 'usage_input', ARGV[4])
redis.call('HINCRBY', record, 'usage_output', ARGV[5])
redis.call('HINCRBY', record, 'usage_total', ARGV[6])
redis.call('HINCRBY', record, 'iterations', 1)
appendPairs(9, tonumber(ARGV[8]))
local openCount = tonumber(ARGV[openAt])
local indexed = {response}
if ARGV[7] == '1' then indexed[#indexed + 1] = roundKey(step, 'results', n); indexed[#indexed + 1] = roundKey(step, 'spans', n) end
if openCount > 0 then
  local round = roundField(step, n)
  redis.call('HSET', pending, round, openCount, round .. '|calls', ARGV[openAt + 1])
  indexed[#indexed + 1] = pending
end
redis.call('SADD', index, unpack(indexed))
local finishAt = openAt + 2
if ARGV[finishAt] ~= '' then finish(finishAt) else touch() end
return {1}
`,
};

/**
 * Records a call's result with its terminal event, once; a fanned-out call is closed with it: its
 * round's open count goes down by one. A `ToolCallStarted` not written before the handler ran goes
 * in just before the terminal event. The results and spans keys are in the run's index already
 * (put there with the round's response).
 * KEYS: record.
 * ARGV: tool_call_id, content, fannedOut ('1' or '0'), terminalJson, spanTraceparent ('' when not traced),
 * step_id, iteration, startedJson ('' when written already).
 * Returns {1, '', openInRound} when recorded now, {0, stored, openInRound} when already recorded,
 * {-1} when the run ended.
 */
const recordToolResult: ScriptDefinition = {
  numberOfKeys: 1,
  lua: `${PRELUDE}
if not string.match(ARGV[7], '^%d+$') then return redis.error_reply('recordToolResult: iteration must be an integer') end
local results = roundKey(ARGV[6], 'results', ARGV[7])
local round = roundField(ARGV[6], ARGV[7])
local _, ended = runStatus()
if ended then
  local existing = redis.call('HGET', results, ARGV[1])
  if existing then return {0, existing, openInRound(round)} end
  return {-1}
end
if redis.call('HSETNX', results, ARGV[1], ARGV[2]) == 0 then
  return {0, redis.call('HGET', results, ARGV[1]), openInRound(round)}
end
local open
if ARGV[3] == '1' then open = redis.call('HINCRBY', pending, round, -1) else open = openInRound(round) end
if ARGV[5] ~= '' then redis.call('HSET', roundKey(ARGV[6], 'spans', ARGV[7]), ARGV[1], ARGV[5]) end
if ARGV[8] ~= '' then redis.call('RPUSH', events, ARGV[8], ARGV[4]) else redis.call('RPUSH', events, ARGV[4]) end
touch()
return {1, '', open}
`,
};

/**
 * KEYS: record. ARGV: tool_call_id, dedupeId, startedJson, step_id, iteration.
 * Returns {1} when the call should run (its `ToolCallStarted` written), {0, openInRound} when its
 * result is already recorded, {-1} when the run has ended.
 */
const startToolCall: ScriptDefinition = {
  numberOfKeys: 1,
  lua: `${PRELUDE}
if redis.call('HEXISTS', roundKey(ARGV[4], 'results', ARGV[5]), ARGV[1]) == 1 then return {0, openInRound(roundField(ARGV[4], ARGV[5]))} end
local _, ended = runStatus()
if ended then return {-1} end
append(ARGV[2], ARGV[3])
touch()
return {1}
`,
};

/**
 * Compare-and-set of a step's state, with events appended only when the state was saved (and the
 * run has not ended); `markRunning` moves a queued run to running.
 * KEYS: record. ARGV: step_id, expectedIterations (-1: none yet), iterations, json, markRunning, count, (dedupeId, json)…
 */
const saveState: ScriptDefinition = {
  numberOfKeys: 1,
  lua: `${PRELUDE}
if not string.match(ARGV[3], '^%d+$') or not string.match(ARGV[6], '^%d+$') or not string.match(ARGV[2], '^-?%d+$') then
  return redis.error_reply('saveState: iterations and count must be integers')
end
local status, ended = runStatus()
if ended then return -1 end
local state = stateKey(ARGV[1])
local current = tonumber(redis.call('HGET', state, 'iterations') or '-1')
if current ~= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', state, 'iterations', ARGV[3], 'json', ARGV[4])
if current == -1 then redis.call('SADD', index, state) end
if ARGV[5] == '1' and status == 'queued' then redis.call('HSET', record, 'status', 'running') end
appendPairs(7, tonumber(ARGV[6]))
touch()
return 1
`,
};

/**
 * Ends a run once (see FINISH). KEYS: record. ARGV: FINISH's arguments.
 * Returns {1, closedCalls} when this call ended the run, {0} when it had ended already.
 */
const finishRun: ScriptDefinition = {
  numberOfKeys: 1,
  lua: `${PRELUDE}${FINISH}
local problem = checkFinish(1)
if problem then return redis.error_reply('finishRun: ' .. problem) end
local _, ended = runStatus()
if ended then return {0} end
return {1, finish(1)}
`,
};

export const SCRIPTS = { createRun, loadStep, appendEvents, recordResponse, startToolCall, recordToolResult, saveState, finishRun } as const;
export type ScriptName = keyof typeof SCRIPTS;
