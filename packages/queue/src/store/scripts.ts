import { RUN_KEY_SUFFIX } from '../keys.ts';

/**
 * The run store's Lua scripts. Each is one atomic step, so a record and its events are written
 * together or not at all, and a re-delivered job cannot write either twice.
 *
 * Events are appended by `append` to a list that only grows: an event's `seq` is its position in
 * the list (gap-free by construction; the store adds it when it reads the log), and an event with
 * a dedupe id is written at most once per run.
 */
const PRELUDE = `
-- A run's key names from its record key, as keys.ts builds them (RUN_KEY_SUFFIX, roundKey).
local EVENTS, PENDING = '${RUN_KEY_SUFFIX.events}', '${RUN_KEY_SUFFIX.pending}'
local function roundKey(record, step, kind, n) return record .. ':' .. step .. ':' .. kind .. ':' .. n end
-- A round's field in the pending hash (its open count); the round's fanned-out calls are in field .. '|calls'.
local function roundField(step, n) return step .. '|' .. n end
local function append(events, dedupe, dedupeId, json)
  if dedupeId ~= '' and redis.call('SADD', dedupe, dedupeId) == 0 then return 0 end
  return redis.call('RPUSH', events, json)
end
local function isTerminal(status)
  return status == 'completed' or status == 'failed' or status == 'cancelled'
end
-- The run's status, and whether the run is gone or has ended (then nothing more is written).
local function runStatus(record)
  local status = redis.call('HGET', record, 'status')
  return status, (not status) or isTerminal(status)
end
-- Calls of a round not settled yet (0 once all are, or when the round fanned nothing out).
local function openInRound(pending, roundField)
  return tonumber(redis.call('HGET', pending, roundField) or '0')
end
local function appendPairs(events, dedupe, from, count)
  for i = 0, count - 1 do append(events, dedupe, ARGV[from + 2 * i], ARGV[from + 2 * i + 1]) end
end
`;

export interface ScriptDefinition {
  readonly numberOfKeys: number;
  readonly lua: string;
}

/**
 * Ending a run, shared by `finishRun` and `recordResponse`: step events, then the run's terminal
 * event with the usage summed in Redis. Cancelling first closes every fanned-out call of a round
 * still open that has no result yet with a `cancelled` result and event, and returns those calls
 * (as JSON). Every key of the run then gets the retention TTL. Reads its arguments from ARGV[at] on: status, step_id, ts,
 * output, errorJson, errorCode, finishedChannel, cancelledContent, retentionSeconds, run_id, count,
 * (dedupeId, json)…
 */
const FINISH = `
local function finish(record, events, dedupe, pending, index, at)
  local run_id = ARGV[at + 9]
  local status = ARGV[at]
  local ts = tonumber(ARGV[at + 2])
  local closed = {}
  if status == 'cancelled' then
    local fields = redis.call('HGETALL', pending)
    local counts = {}
    for i = 1, #fields, 2 do counts[fields[i]] = fields[i + 1] end
    for i = 1, #fields, 2 do
      local step, n = string.match(fields[i], '^(.*)|(%d+)|calls$')
      if step and tonumber(counts[roundField(step, n)] or '0') > 0 then
        local results = roundKey(record, step, 'results', n)
        for _, call in ipairs(cjson.decode(fields[i + 1])) do
          if redis.call('HSETNX', results, call[1], ARGV[at + 7]) == 1 then
            closed[#closed + 1] = cjson.encode({step_id = step, iteration = tonumber(n), tool_call_id = call[1], tool_name = call[2]})
            append(events, dedupe, '', cjson.encode({kind = 'ToolCallFailed', step_id = step, ts = ts,
              iteration = tonumber(n), tool_name = call[2], tool_call_id = call[1], duration_ms = 0,
              error_code = 'cancelled'}))
          end
        end
      end
    end
  end
  appendPairs(events, dedupe, at + 11, tonumber(ARGV[at + 10]))
  local usage = redis.call('HMGET', record, 'usage_input', 'usage_output', 'usage_total')
  local kinds = {completed = 'RunCompleted', failed = 'RunFailed', cancelled = 'RunCancelled'}
  local event = {kind = kinds[status], step_id = ARGV[at + 1], ts = ts,
    usage = {input = tonumber(usage[1] or '0'), output = tonumber(usage[2] or '0'), total = tonumber(usage[3] or '0')}}
  if status == 'failed' then event.error_code = ARGV[at + 5] end
  append(events, dedupe, '', cjson.encode(event))
  local fields = {'status', status, 'finished_at', ARGV[at + 2]}
  if ARGV[at + 3] ~= '' then fields[#fields + 1] = 'output'; fields[#fields + 1] = ARGV[at + 3] end
  if ARGV[at + 4] ~= '' then fields[#fields + 1] = 'error'; fields[#fields + 1] = ARGV[at + 4] end
  redis.call('HSET', record, unpack(fields))
  -- The index lists itself (createRun puts it there), so this expires it too.
  for _, key in ipairs(redis.call('SMEMBERS', index)) do redis.call('EXPIRE', key, ARGV[at + 8]) end
  redis.call('PUBLISH', ARGV[at + 6], run_id)
  return closed
end
`;

/** KEYS: record, events, dedupe, index, idempotency. ARGV: run_id, useIdempotency, fieldCount, fields…, eventJson. */
const createRun: ScriptDefinition = {
  numberOfKeys: 5,
  lua: `${PRELUDE}
if ARGV[2] == '1' then
  local existing = redis.call('GET', KEYS[5])
  if existing then return {0, existing} end
  redis.call('SET', KEYS[5], ARGV[1])
  redis.call('SADD', KEYS[4], KEYS[5])
end
local n = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], unpack(ARGV, 4, 3 + 2 * n))
redis.call('SADD', KEYS[4], KEYS[1], KEYS[2], KEYS[3], KEYS[4])
append(KEYS[2], KEYS[3], '', ARGV[4 + 2 * n])
return {1, ARGV[1]}
`,
};

/**
 * Everything a provider job reads, in one call. KEYS: record, state, previousResponse, response,
 * previousResults, previousSpans. ARGV: '1' when there is a previous round to read (not for call 1).
 * Returns the record's fields, the state JSON, both responses, and the previous round's results
 * and span links as flat field/value lists.
 */
const loadStep: ScriptDefinition = {
  numberOfKeys: 6,
  lua: `
local previous = ARGV[1] == '1'
return {
  redis.call('HMGET', KEYS[1], 'status', 'agent', 'input', 'config', 'exec_config', 'trace'),
  redis.call('HGET', KEYS[2], 'json'),
  previous and redis.call('GET', KEYS[3]),
  redis.call('GET', KEYS[4]),
  previous and redis.call('HGETALL', KEYS[5]) or {},
  previous and redis.call('HGETALL', KEYS[6]) or {},
}
`,
};

/** KEYS: record, events, dedupe. ARGV: count, (dedupeId, json)…  Refused once the run has ended. */
const appendEvents: ScriptDefinition = {
  numberOfKeys: 3,
  lua: `${PRELUDE}
local _, ended = runStatus(KEYS[1])
if ended then return 0 end
appendPairs(KEYS[2], KEYS[3], 2, tonumber(ARGV[1]))
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
 * KEYS: record, events, dedupe, index, response, pending, results, spans.
 * ARGV: responseJson, input, output, total, hasCalls ('1' or '0'), eventCount, (dedupeId, json)…, openCount, roundField,
 * callsJson ([[tool_call_id, tool_name], …], '' when none), FINISH's arguments or ''
 * Returns {1} when recorded now, {0, stored} when an earlier delivery recorded it, {-1} when the run ended.
 */
const recordResponse: ScriptDefinition = {
  numberOfKeys: 8,
  lua: `${PRELUDE}${FINISH}
local _, ended = runStatus(KEYS[1])
if ended then return {-1} end
local existing = redis.call('GET', KEYS[5])
if existing then return {0, existing} end
redis.call('SET', KEYS[5], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'usage_input', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'usage_output', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'usage_total', ARGV[4])
redis.call('HINCRBY', KEYS[1], 'iterations', 1)
local eventCount = tonumber(ARGV[6])
appendPairs(KEYS[2], KEYS[3], 7, eventCount)
local openAt = 7 + 2 * eventCount
local openCount = tonumber(ARGV[openAt])
local indexed = {KEYS[5]}
if ARGV[5] == '1' then indexed[#indexed + 1] = KEYS[7]; indexed[#indexed + 1] = KEYS[8] end
if openCount > 0 then
  redis.call('HSET', KEYS[6], ARGV[openAt + 1], openCount, ARGV[openAt + 1] .. '|calls', ARGV[openAt + 2])
  indexed[#indexed + 1] = KEYS[6]
end
redis.call('SADD', KEYS[4], unpack(indexed))
local finishAt = openAt + 3
if ARGV[finishAt] ~= '' then finish(KEYS[1], KEYS[2], KEYS[3], KEYS[6], KEYS[4], finishAt) end
return {1}
`,
};

/**
 * Records a call's result with its terminal event, once; a fanned-out call is closed with it: its
 * round's open count goes down by one. A `ToolCallStarted` not written before the handler ran goes
 * in just before the terminal event. The results and spans keys are in the run's index already
 * (put there with the round's response). The hottest script (one per tool call), so it is sent
 * the record's key alone and names the others itself.
 * KEYS: record.
 * ARGV: tool_call_id, content, fannedOut ('1' or '0'), terminalJson, spanTraceparent ('' when not traced),
 * step_id, iteration, startedJson ('' when written already).
 * Returns {1, '', openInRound} when recorded now, {0, stored, openInRound} when already recorded,
 * {-1} when the run ended.
 */
const recordToolResult: ScriptDefinition = {
  numberOfKeys: 1,
  lua: `${PRELUDE}
local record = KEYS[1]
local results = roundKey(record, ARGV[6], 'results', ARGV[7])
local pending = record .. PENDING
local round = roundField(ARGV[6], ARGV[7])
local _, ended = runStatus(record)
if ended then
  local existing = redis.call('HGET', results, ARGV[1])
  if existing then return {0, existing, openInRound(pending, round)} end
  return {-1}
end
if redis.call('HSETNX', results, ARGV[1], ARGV[2]) == 0 then
  return {0, redis.call('HGET', results, ARGV[1]), openInRound(pending, round)}
end
local open
if ARGV[3] == '1' then open = redis.call('HINCRBY', pending, round, -1) else open = openInRound(pending, round) end
if ARGV[5] ~= '' then redis.call('HSET', roundKey(record, ARGV[6], 'spans', ARGV[7]), ARGV[1], ARGV[5]) end
if ARGV[8] ~= '' then redis.call('RPUSH', record .. EVENTS, ARGV[8], ARGV[4]) else redis.call('RPUSH', record .. EVENTS, ARGV[4]) end
return {1, '', open}
`,
};

/**
 * KEYS: record, events, dedupe, results, pending. ARGV: tool_call_id, dedupeId, startedJson, roundField.
 * Returns {1} when the call should run (its `ToolCallStarted` written), {0, openInRound} when its
 * result is already recorded, {-1} when the run has ended.
 */
const startToolCall: ScriptDefinition = {
  numberOfKeys: 5,
  lua: `${PRELUDE}
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1 then return {0, openInRound(KEYS[5], ARGV[4])} end
local status, ended = runStatus(KEYS[1])
if ended then return {-1} end
append(KEYS[2], KEYS[3], ARGV[2], ARGV[3])
return {1}
`,
};

/**
 * Compare-and-set of a step's state, with events appended only when the state was saved (and the
 * run has not ended); `markRunning` moves a queued run to running.
 * KEYS: state, index, record, events, dedupe. ARGV: expectedIterations (-1: none yet), iterations, json, markRunning, count, (dedupeId, json)…
 */
const saveState: ScriptDefinition = {
  numberOfKeys: 5,
  lua: `${PRELUDE}
local status, ended = runStatus(KEYS[3])
if ended then return -1 end
local current = tonumber(redis.call('HGET', KEYS[1], 'iterations') or '-1')
if current ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'iterations', ARGV[2], 'json', ARGV[3])
if current == -1 then redis.call('SADD', KEYS[2], KEYS[1]) end
if ARGV[4] == '1' and status == 'queued' then redis.call('HSET', KEYS[3], 'status', 'running') end
appendPairs(KEYS[4], KEYS[5], 6, tonumber(ARGV[5]))
return 1
`,
};

/**
 * Ends a run once (see FINISH). KEYS: record, events, dedupe, pending, index. ARGV: FINISH's arguments.
 * Returns {1, closedCalls} when this call ended the run, {0} when it had ended already.
 */
const finishRun: ScriptDefinition = {
  numberOfKeys: 5,
  lua: `${PRELUDE}${FINISH}
local _, ended = runStatus(KEYS[1])
if ended then return {0} end
return {1, finish(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], 1)}
`,
};

export const SCRIPTS = { createRun, loadStep, appendEvents, recordResponse, startToolCall, recordToolResult, saveState, finishRun } as const;
export type ScriptName = keyof typeof SCRIPTS;
