--[[
  Folds an ended run into its record and one archive (see records/archive.ts), in one step: the
  archive is written, the record marked `archived` (its format), and every other key its index
  lists under the record's name deleted, the index too; the run leaves its partition's uncompacted
  set (finish.lua adds it there). The waiting calls (SPEC §20) someone may
  still answer again are kept in the record: its `approvals` and `tool_results` fields (each
  hash as a JSON map, see keptWaitsField), which settleCall and the waiting store read for a
  compacted run. The archive expires with the record. The idempotency
  key (listed in the index, not under the record's name) stays as it is, with its expiry.
  KEYS[1] record
  ARGV[1] the archive's bytes   ARGV[2] its format   ARGV[3] the index's size dumpRun saw
  ARGV[4..] the run's BullMQ jobs, each as two arguments: its queue's key (`<tag>:<queue>`, in
          the run's slot) and its id. Each that has finished (in the queue's completed or failed
          set) is removed: its hash and its logs, and its entry there. A job still held is left
          (the job ending the run removes itself when it completes).
  Returns 1 when compacted now; 0 when the run is gone, has not ended, is compacted already, or its
  index changed since it was read (nothing is written). Safe to run twice.
]]
--- @include "prelude"
local archive, format, seen = ARGV[1], ARGV[2], tonumber(ARGV[3])
local status, ended = runStatus()
if not status or not ended then return 0 end
if redis.call('HEXISTS', record, 'archived') == 1 then return 0 end
if redis.call('SCARD', index) ~= seen then return 0 end
local ttl = redis.call('PTTL', record)
local archiveKey = record .. '{{RUN_KEY_SUFFIX.archive}}'
if ttl > 0 then redis.call('SET', archiveKey, archive, 'PX', ttl) else redis.call('SET', archiveKey, archive) end
local fields = {'archived', format}
for _, kind in ipairs({'approval', 'result'}) do
  local waits = waitsOf(kind)
  if redis.call('EXISTS', waits) == 1 then
    local flat = redis.call('HGETALL', waits)
    local map = {}
    for i = 1, #flat, 2 do map[flat[i]] = flat[i + 1] end
    fields[#fields + 1] = keptWaitsField(kind)
    fields[#fields + 1] = cjson.encode(map)
  end
end
redis.call('HSET', record, unpack(fields))
-- Every key to delete, in as few DELs as Lua's stack allows: the run's keys, its index, and the
-- hashes and logs of its finished jobs.
local doomed = {index}
local head = record .. ':'
for _, key in ipairs(redis.call('SMEMBERS', index)) do
  if key ~= archiveKey and string.sub(key, 1, #head) == head then doomed[#doomed + 1] = key end
end
local run_id, _, tag = runIdentity()
redis.call('ZREM', tag .. '{{UNCOMPACTED_RUNS_SUFFIX}}', run_id)
-- The jobs by queue, in slices within Lua's limit on unpacked values: each finished set is asked
-- once a slice which of the slice's jobs it holds; those are removed from it, with their keys.
local SLICE = 500
local function removeFinished(queue, ids)
  local left = ids
  for _, set in ipairs({':completed', ':failed'}) do
    if #left == 0 then return end
    local scores = redis.call('ZMSCORE', queue .. set, unpack(left))
    local found, rest = {}, {}
    for j, id in ipairs(left) do
      if scores[j] then
        found[#found + 1] = id
        doomed[#doomed + 1] = queue .. ':' .. id
        doomed[#doomed + 1] = queue .. ':' .. id .. ':logs'
      else
        rest[#rest + 1] = id
      end
    end
    if #found > 0 then redis.call('ZREM', queue .. set, unpack(found)) end
    left = rest
  end
end
local byQueue, order = {}, {}
for i = 4, #ARGV - 1, 2 do
  local queue = ARGV[i]
  local ids = byQueue[queue]
  if not ids then
    ids = {}
    byQueue[queue] = ids
    order[#order + 1] = queue
  end
  ids[#ids + 1] = ARGV[i + 1]
  if #ids == SLICE then
    removeFinished(queue, ids)
    byQueue[queue] = {}
  end
end
for _, queue in ipairs(order) do
  if #byQueue[queue] > 0 then removeFinished(queue, byQueue[queue]) end
end
for first = 1, #doomed, SLICE do
  redis.call('DEL', unpack(doomed, first, math.min(first + SLICE - 1, #doomed)))
end
return 1
