--[[
  The run's stream (SPEC §12), written by appendStream (text while a call streams),
  recordResponse (the rest of a call's text and its tool calls), recordToolResult (a call's end)
  and finish (the `end` chunk). Included after the prelude.
    stream       a Redis Stream: entry id '0-<offset>', given by XADD '0-*' (the next sequence
                 number: 1, 2, 3 … per run, no gaps, since entries are never deleted), field
                 'c' = the chunk's JSON without its offset (readers take it from the id)
    stream-meta  'a:<step>|<n>' = the attempt the stream shows for iteration n of the step;
                 'b:<step>|<n>' = the bytes of text that attempt has streamed
  An iteration's attempts only move forward: text of an older attempt than the one shown is
  dropped, and a newer one begins with a `reset` chunk (when an earlier one had begun), so a
  reader never shows text twice. Both keys join the run's index with its first chunk, so they are
  kept as long as the run.
]]
local stream, streamMeta = record .. '{{RUN_KEY_SUFFIX.stream}}', record .. '{{RUN_KEY_SUFFIX.streamMeta}}'

-- Appends a chunk given as its JSON (without its offset).
local function streamAddJson(json)
  local id = redis.call('XADD', stream, '0-*', 'c', json)
  if id == '0-1' then redis.call('SADD', index, stream, streamMeta) end
end
local function streamAdd(chunk) streamAddJson(cjson.encode(chunk)) end

local function streamText(step, n, attempt, text)
  if text == '' then return end
  streamAdd({type = 'text', step_id = step, iteration = n, attempt = attempt, delta = text})
  redis.call('HINCRBY', streamMeta, 'b:' .. step .. '|' .. n, #text)
end

-- The attempt the stream shows for iteration n (-1: none yet), and the bytes of text it streamed.
local function streamShown(step, n)
  local shown = redis.call('HMGET', streamMeta, 'a:' .. step .. '|' .. n, 'b:' .. step .. '|' .. n)
  return tonumber(shown[1] or '-1'), tonumber(shown[2] or '0')
end

-- Makes `attempt` the one shown for iteration n: a reset first when another had begun.
local function streamShow(step, n, attempt, shown)
  if shown >= 0 then streamAdd({type = 'reset', step_id = step, iteration = n, attempt = attempt}) end
  redis.call('HSET', streamMeta, 'a:' .. step .. '|' .. n, attempt, 'b:' .. step .. '|' .. n, 0)
end

--[[ A recorded response's part of the stream: `s` = {attempt, text (the whole answer's text),
  pending (its text not streamed yet), calls ({tool_call_id, tool_name} pairs), closed (absent, or
  the ids of its calls the loop ends without executing: each gets a failed `tool_result` after the
  `tool_call`s)}. When the attempt
  shown streamed exactly the answer's text but `pending`, `pending` completes it. When another
  attempt is shown, or its text does not add up (another delivery's attempt, a lost write), the
  iteration is reset and its whole text written at once, so the stream's text is always the
  recorded one; that reset never goes back: when the attempt recorded is not newer than the one
  shown (a stale delivery that answered last), it is shown as the attempt after the one shown.
  When nothing of the iteration was streamed (a run that does not stream, a provider that fell
  back to a plain call), its text is one chunk, with no bookkeeping. ]]
local function streamResponse(step, n, s)
  local shown, bytes = streamShown(step, n)
  local attempt = s.attempt
  if shown == attempt and bytes + #s.pending == #s.text then
    streamText(step, n, attempt, s.pending)
  elseif shown >= 0 then
    attempt = math.max(attempt, shown + 1)
    streamShow(step, n, attempt, shown)
    streamText(step, n, attempt, s.text)
  elseif s.text ~= '' then
    streamAdd({type = 'text', step_id = step, iteration = n, attempt = attempt, delta = s.text})
  end
  for _, call in ipairs(s.calls) do
    streamAdd({type = 'tool_call', step_id = step, iteration = n, attempt = attempt, tool_call_id = call[1], tool_name = call[2]})
  end
  for _, id in ipairs(s.closed or {}) do
    streamAdd({type = 'tool_result', step_id = step, iteration = n, tool_call_id = id, status = 'failed'})
  end
end

local function checkStreamPart(s)
  if type(s) ~= 'table' then refuse('stream must be a map') end
  needWhole('stream.attempt', s.attempt)
  needText('stream.text', s.text)
  needText('stream.pending', s.pending)
  if type(s.calls) ~= 'table' then refuse('stream.calls must be a list') end
  for _, call in ipairs(s.calls) do
    if type(call) ~= 'table' or not isText(call[1]) or not isText(call[2]) then refuse('stream.calls must hold {tool_call_id, tool_name} pairs') end
  end
  if s.closed ~= nil then
    if type(s.closed) ~= 'table' then refuse('stream.closed must be a list') end
    for _, id in ipairs(s.closed) do if not isText(id) then refuse('stream.closed must hold tool_call_ids') end end
  end
end

--[[ The text a cancelled run keeps as its output: that of the iteration the stream shows last,
  as a reader rebuilds it (nil when that iteration's attempt has no text yet). Walks the stream
  backwards; runs only when a run is cancelled. ]]
local function streamedTextSoFar()
  local found, parts, last = nil, {}, '+'
  local function joined()
    if #parts == 0 then return nil end
    local ordered = {}
    for i = #parts, 1, -1 do ordered[#ordered + 1] = parts[i] end
    return table.concat(ordered)
  end
  while true do
    local entries = redis.call('XREVRANGE', stream, last, '-', 'COUNT', 200)
    if #entries == 0 then return joined() end
    for _, entry in ipairs(entries) do
      local chunk = cjson.decode(entry[2][2])
      if chunk.type == 'text' or chunk.type == 'reset' then
        local place = chunk.step_id .. '|' .. chunk.iteration .. '|' .. chunk.attempt
        found = found or place
        if place == found then
          if chunk.type == 'reset' then return joined() end
          parts[#parts + 1] = chunk.delta
        end
      end
      last = '(' .. entry[1]
    end
  end
end
