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
-- How a running step's latest round that had calls waiting outside (an approval, a result, a child
-- run) stands: the round is noted per step ('|waits|<step>' in pending) and read back here, so a
-- round since settled counts as not waiting. Returns nil when the step is not held up by calls
-- waiting outside; else whether every open call waits for a person or a result (not a child run),
-- and the round's first timeout ('|due') when any does.
local function stepWaits(step)
  local round = redis.call('HGET', pending, '|waits|' .. step)
  if not round then return nil end
  local counts = redis.call('HMGET', pending, round, round .. '|awaiting', round .. '|children', round .. '|due')
  local open, awaiting, children = tonumber(counts[1] or '0'), tonumber(counts[2] or '0'), tonumber(counts[3] or '0')
  if open == 0 or awaiting + children < open then return nil end
  return {awaiting >= open, awaiting > 0 and tonumber(counts[4] or '') or nil}
end
-- The run's running steps: a workflow run's, from its steps hash; an agent run's one step.
local function runningSteps(step)
  if redis.call('EXISTS', steps) == 0 then return {step} end
  local running, flat = {}, redis.call('HGETALL', steps)
  for i = 1, #flat, 2 do
    if flat[i + 1] == 'running' and not string.find(flat[i], '|', 1, true) then running[#running + 1] = flat[i] end
  end
  return running
end
-- The run's status and its place in the watchdog's scan (its score in the active set), from every
-- running step (SPEC §10: a run waits while at least one call waits and no job of it is queued or
-- active). It waits when each running step's open calls all wait for a person or a result; else it
-- is running. It is off the scan while each running step's open calls all wait outside, until the
-- first timeout of their rounds is due, or for good while they wait only for child runs (a child's
-- end settles its call; the watchdog watches the child); any other run is in it from now. `step`:
-- an agent run's step (a workflow run's are read from its steps hash).
local function settleWaiting(step)
  local status = redis.call('HGET', record, 'status')
  if status ~= 'running' and status ~= 'waiting' then return end
  local running = runningSteps(step)
  local allWait, allOut, due = #running > 0, #running > 0, nil
  for _, each in ipairs(running) do
    local waits = stepWaits(each)
    if not waits then
      allWait, allOut = false, false
      break
    end
    if not waits[1] then allWait = false end
    if waits[2] and (not due or waits[2] < due) then due = waits[2] end
  end
  local now = allWait and 'waiting' or 'running'
  if now ~= status then redis.call('HSET', record, 'status', now) end
  local run_id, active = runIdentity()
  redis.call('ZADD', active, 'XX', allOut and (due or '+inf') or serverMs(), run_id)
end
-- After a change to round `round`'s waiting calls: the round is its step's latest with calls
-- waiting outside, and the run's status and scan follow (settleWaiting).
local function waitingOrRunning(round)
  local step = string.match(round, '^(.*)|%d+$')
  redis.call('HSET', pending, '|waits|' .. step, round)
  settleWaiting(step)
end
