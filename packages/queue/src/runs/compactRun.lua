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
local head = record .. ':'
for _, key in ipairs(redis.call('SMEMBERS', index)) do
  if key ~= archiveKey and string.sub(key, 1, #head) == head then redis.call('DEL', key) end
end
redis.call('DEL', index)
local run_id, _, tag = runIdentity()
redis.call('ZREM', tag .. '{{UNCOMPACTED_RUNS_SUFFIX}}', run_id)
for i = 4, #ARGV - 1, 2 do
  local queue, id = ARGV[i], ARGV[i + 1]
  for _, set in ipairs({':completed', ':failed'}) do
    if redis.call('ZREM', queue .. set, id) == 1 then
      local job = queue .. ':' .. id
      redis.call('DEL', job, job .. ':logs')
    end
  end
end
return 1
