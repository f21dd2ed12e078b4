/**
 * `@arcflow/queue/client`: the client and what reads runs (the run store, keys, connections),
 * without the worker. Importing it loads ioredis and `@arcflow/core`, not BullMQ: the client
 * imports its queue operations (enqueue, approvals, queue depths) when one is first called, so
 * a process that only reads runs (`arcflow get`, a status page) starts in the time of a Redis
 * client. `@arcflow/queue` exports all of this too, with the worker.
 */
export {
  createClient,
  CLIENT_DEFAULTS,
  type ArcflowClient,
  type ClientOptions,
  type EnqueueRequest,
  type ListQuery,
  type AgentInfo,
  type QueueInfo,
  type ThreadHandle,
  type RunMessages,
  type StreamOptions,
  type ForkRequest,
  type BulkRequest,
  type BulkOutcome,
} from './client/client.ts';
export { checkEnqueueOptions } from './client/enqueue-options.ts';
export { checkEnqueueNames, checkRunId } from './client/checks.ts';
export { unknownRun } from './runs/unknown-run.ts';
export { type ConnectionOptions, CONNECTION_DEFAULTS, resolveConnection } from './config/options.ts';
export { RunStore } from './runs/run-store.ts';
export { StoredFormatError } from './records/formats.ts';
export { keysFor, QueueName, JobId, hashTag } from './redis/keys.ts';
export { connectRedis, duplicateRedis, clusterNodes } from './redis/connect.ts';
export { closeRedis, redisRefusal, redactUrl } from './redis/connection.ts';
export { isPartitionCount, MAX_PARTITIONS } from './redis/partition-map.ts';
export { nearestName } from './records/nearest-name.ts';
