// The client and what reads runs (also `@arcflow/queue/client`, which loads no BullMQ), and the worker.
export * from './client-entry.ts';
export { startWorker, newWorkerId, type ArcflowWorker } from './worker/worker.ts';
export { type WorkerOptions, type WorkerRole, WORKER_DEFAULTS } from './config/options.ts';
export type { ProviderJobData, ToolJobData, TraceCarrier } from './jobs/jobs.ts';
export { openMetricsReader, type MetricsReader, type MetricsReaderOptions } from './metrics/metrics-reader.ts';
export { collectReadings, type CollectedReadings, type QueueLayout } from './metrics/queue-readings.ts';
