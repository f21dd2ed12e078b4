--[[
  Shared by every store script. KEYS[1] is the run's record key; the run's other keys are named
  from it as keys.ts names them (RUN_KEY_SUFFIX, stateKey, transcriptKey, roundKey), so each script is sent one
  key. A script's arguments are named in its header: scalars as positions bound to named locals
  on its first lines, lists and maps as one msgpack map (read with cmsgpack, by name).
]]
local record = KEYS[1]
local events, dedupe = record .. '{{RUN_KEY_SUFFIX.events}}', record .. '{{RUN_KEY_SUFFIX.dedupe}}'
local pending, index = record .. '{{RUN_KEY_SUFFIX.pending}}', record .. '{{RUN_KEY_SUFFIX.index}}'
-- A workflow run's steps (status, start time) and their outputs and errors.
local steps, outputs = record .. '{{RUN_KEY_SUFFIX.steps}}', record .. '{{RUN_KEY_SUFFIX.outputs}}'
-- Calls that waited for a person's approval.
local approvals = record .. '{{RUN_KEY_SUFFIX.approvals}}'
-- The hash of a kind of waiting call (calls/waiting/waiting-call.ts): approvals, or results from outside.
local function waitsOf(kind)
  if kind == 'approval' then return approvals end
  return record .. '{{RUN_KEY_SUFFIX.toolResults}}'
end
-- The record field an ended run's waits of a kind are kept in once it is compacted (runs/compactRun.lua), as a JSON map.
local function keptWaitsField(kind)
  if kind == 'approval' then return 'approvals' end
  return 'tool_results'
end
-- The run's id, and the prefix's set of runs not ended yet, scored by when each last made
-- progress (server time, ms): the watchdog looks there for runs that stopped moving. Read only
-- by the scripts that need them (a pattern match costs about as much as a Redis call).
-- Returns the run's id, the active set's key and the prefix's hash tag.
local function runIdentity()
  local tag, run_id = string.match(record, '^(.*):run:([^:]*)$')
  return run_id, tag .. '{{ACTIVE_RUNS_SUFFIX}}', tag
end

local function stateKey(step) return record .. ':' .. step .. ':state' end
local function transcriptKey(step) return record .. ':' .. step .. ':transcript' end
local function stateLogKey(step) return record .. ':' .. step .. ':state-log' end
local function roundKey(step, kind, n) return record .. ':' .. step .. ':' .. kind .. ':' .. n end
-- A round's field in the pending hash (its open count); the round's fanned-out calls are in field .. '|calls'.
local function roundField(step, n) return step .. '|' .. n end
-- Where provider call n of a step stands among its models (see moveCall.lua), in the pending hash.
local function tryField(step, n) return step .. '|' .. n .. '|try' end

-- Input checks, made before a script's first write: a refused call changes nothing.
local function refuse(message) error({err = 'ERR arcflow: ' .. message}) end
local function isText(value) return type(value) == 'string' end
local function isWhole(value) return type(value) == 'number' and value >= 0 and value == math.floor(value) and value < 2^53 end
local function needText(name, value) if not isText(value) then refuse(name .. ' must be text') end end
local function needWhole(name, value) if not isWhole(value) then refuse(name .. ' must be a whole number >= 0') end end
-- A list of events to append: {dedupeId, json} pairs ('' for no dedupe id).
local function needEvents(name, list)
  if type(list) ~= 'table' then refuse(name .. ' must be a list') end
  for _, pair in ipairs(list) do
    if type(pair) ~= 'table' or not isText(pair[1]) or not isText(pair[2]) then refuse(name .. ' must hold {dedupeId, json} pairs') end
  end
end

-- Tells the run's event followers, once per script, that its events grew: a sharded publish to the
-- run's own channel (in the run's slot, so a cluster tells only the node that has it), which costs
-- next to nothing while nobody follows the run.
local told = false
local function tellFollowers()
  if told then return end
  told = true
  redis.call('SPUBLISH', record .. '{{RUN_KEY_SUFFIX.tail}}', '')
end
-- Appends an event; one with a dedupe id is written at most once per run.
local function append(dedupeId, json)
  if dedupeId ~= '' and redis.call('SADD', dedupe, dedupeId) == 0 then return 0 end
  tellFollowers()
  return redis.call('RPUSH', events, json)
end
local function appendAll(list)
  for _, pair in ipairs(list) do append(pair[1], pair[2]) end
end

local function serverMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Marks progress: the run's score in the active set moves to now. Called once per iteration
-- (when its response is recorded), not per call: while a provider call or a round's calls run,
-- their jobs are live, which is what the watchdog checks before it acts.
local function touch()
  local run_id, active = runIdentity()
  redis.call('ZADD', active, 'XX', serverMs(), run_id)
end
-- A positional argument that must be a whole number, as a number.
local function wholeArg(name, value)
  local number = tonumber(value)
  if not isWhole(number) then refuse(name .. ' must be a whole number >= 0') end
  return number
end

local function isTerminal(status)
  return status == 'completed' or status == 'failed' or status == 'cancelled'
end
-- The run's status, and whether the run is gone or has ended (then nothing more is written).
local function runStatus()
  local status = redis.call('HGET', record, 'status')
  return status, (not status) or isTerminal(status)
end
-- A queued run is running from its first step's first write.
local function markRunning(status)
  if status == 'queued' then redis.call('HSET', record, 'status', 'running') end
end
-- Calls of a round not settled yet (0 once all are, or when the round fanned nothing out).
local function openInRound(round)
  return tonumber(redis.call('HGET', pending, round) or '0')
end
-- The run's place in the watchdog's scan (its score in the active set), from its round: a run
-- whose every open call waits outside (an approval, a result, a child run) is off the scan until
-- the first timeout of its round is due (`|due`), or for good while it waits only for child runs
-- (a child's end settles its call; the watchdog watches the child, and an ended child whose call
-- was not settled); any other is in it from now.
local function placeInScan(round, open)
  local run_id, active = runIdentity()
  local counts = redis.call('HMGET', pending, round .. '|awaiting', round .. '|children', round .. '|due')
  local awaiting, children = tonumber(counts[1] or '0'), tonumber(counts[2] or '0')
  local score = serverMs()
  if open > 0 and awaiting + children >= open then score = (awaiting > 0 and counts[3]) or '+inf' end
  redis.call('ZADD', active, 'XX', score, run_id)
end
-- A run whose round has no open call but those waiting for a person or a result waits; one whose
-- round has other open calls (or none: its join comes next) is running. Either way, its place in
-- the watchdog's scan follows (placeInScan).
local function waitingOrRunning(round, open)
  local status = redis.call('HGET', record, 'status')
  if status ~= 'running' and status ~= 'waiting' then return end
  local waiting = tonumber(redis.call('HGET', pending, round .. '|awaiting') or '0')
  local now = (open > 0 and waiting >= open) and 'waiting' or 'running'
  if now ~= status then redis.call('HSET', record, 'status', now) end
  placeInScan(round, open)
end
