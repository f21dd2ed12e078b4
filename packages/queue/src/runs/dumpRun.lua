--[[
  Reads an ended run's keys for its compaction (see records/archive.ts): every key its index lists
  under the record's name, by type.
  KEYS[1] record
  Returns {0} when the run is gone, has not ended, or is compacted already; else {1, size, keys,
  agent, workflow ('' for an agent run)},
  size the index's member count (compactRun checks it is unchanged) and keys a flat list of
  suffix (the key's name after the record's), type, value: a string's value, a list's items, a
  hash's or a stream's entries as Redis gives them. A set (the dedupe ids) is left out: nothing is
  appended to an ended run. So are the rounds' tool span ids (`:<step>:spans:<n>`): only a join
  reads them, to link its span to its round's, and an ended run has no join to come. Writes nothing.
]]
--- @include "prelude"
local status, ended = runStatus()
if not status or not ended then return {0} end
if redis.call('HEXISTS', record, 'archived') == 1 then return {0} end
local members = redis.call('SMEMBERS', index)
local out = {}
local head = record .. ':'
for _, key in ipairs(members) do
  if key ~= index and string.sub(key, 1, #head) == head and not string.find(key, ':spans:%d+$') then
    local kind = redis.call('TYPE', key).ok
    local value = nil
    if kind == 'string' then value = redis.call('GET', key)
    elseif kind == 'list' then value = redis.call('LRANGE', key, 0, -1)
    elseif kind == 'hash' then value = redis.call('HGETALL', key)
    elseif kind == 'stream' then value = redis.call('XRANGE', key, '-', '+')
    end
    if value then
      out[#out + 1] = string.sub(key, #record + 1)
      out[#out + 1] = kind
      out[#out + 1] = value
    end
  end
end
local facts = redis.call('HMGET', record, 'agent', 'workflow')
return {1, #members, out, facts[1] or '', facts[2] or ''}
