--[[
  Releases the locks of one queue's active jobs whose worker process is gone, and marks those jobs
  stalled, so that BullMQ's stall check (run next, with the queue's own stall limit) moves them back
  to wait at once instead of when the locks expire.

  A lock's value is the token of the BullMQ Worker that took the job: `<owner>/<n>:<m>`, where
  `<owner>` is the arcflow worker id that names that process's connections. A lock whose owner is
  not among the live ones is deleted (compared by value, so a lock another worker took since is
  left alone); a token of another form (a worker of an older version) is never released here.

  KEYS[1] the queue's active list
  KEYS[2] the queue's stalled set
  KEYS[3] the queue's stalled-check key (deleted when a lock was released, so the stall check runs now)
  ARGV[1] the queue's key prefix (`<tag>:<queue>:`): a job's lock is ARGV[1] .. id .. ':lock'
  ARGV[2..] the owners whose connections are open (live worker processes)

  Returns the number of locks released.
]]
local live = {}
for i = 2, #ARGV do
  live[ARGV[i]] = true
end
local released = 0
for _, id in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local lockKey = ARGV[1] .. id .. ':lock'
  local token = redis.call('GET', lockKey)
  if token then
    local owner = string.match(token, '^(.*)/[^/]*$')
    if owner and not live[owner] then
      redis.call('DEL', lockKey)
      redis.call('SADD', KEYS[2], id)
      released = released + 1
    end
  end
end
if released > 0 then
  redis.call('DEL', KEYS[3])
end
return released
