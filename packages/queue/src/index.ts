export { createClient, CLIENT_DEFAULTS, type ArcflowClient, type ClientOptions, type EnqueueRequest, type ListQuery, type AgentInfo, type QueueInfo } from './client.ts';
export { startWorker, newWorkerId, type ArcflowWorker } from './engine/worker.ts';
export { type WorkerOptions, type WorkerRole, type ConnectionOptions, CONNECTION_DEFAULTS, WORKER_DEFAULTS, resolveConnection } from './engine/options.ts';
export { RunStore } from './store/run-store.ts';
export { keysFor, QueueName, JobId, hashTag } from './keys.ts';
export { connectRedis, duplicateRedis, clusterNodes } from './redis-connect.ts';
export { closeRedis, redisRefusal, redactUrl } from './connection.ts';
export type { ProviderJobData, ToolJobData, TraceCarrier } from './engine/jobs.ts';
export { isPartitionCount, MAX_PARTITIONS } from './store/partition-map.ts';
