// The design floor's BullMQ jobs, built with arcflow's own job ids and options (see
// floor-worker.ts): shared by the floor's worker process and the bench process that enqueues.
import type { JobsOptions, Queue } from 'bullmq';
import { CONNECTION_DEFAULTS, type ProviderJobData, type ToolJobData, WORKER_DEFAULTS, hashTag } from '@arcflow/queue';
import { finishedJobRetention, providerJobOptions, toolJobOptions } from '../packages/queue/src/jobs/jobs.ts';
import { noop } from './agents.ts';

export const FLOOR_QUEUES = { provider: 'floor-provider', tool: 'floor-tool' } as const;
const TRACE = { traceparent: '00-0123456789abcdef0123456789abcdef-0123456789abcdef-01' };

/** The floor workers' BullMQ options: arcflow's lock, stall and retention defaults. */
export const FLOOR_WORKER_OPTIONS = {
  lockDuration: WORKER_DEFAULTS.lock_duration_ms,
  stalledInterval: WORKER_DEFAULTS.stalled_interval_ms,
  maxStalledCount: WORKER_DEFAULTS.max_stalled_count,
  ...finishedJobRetention(CONNECTION_DEFAULTS.retention_seconds),
};

/** The floor's provider workers, with arcflow's concurrency. */
export const FLOOR_PROVIDER_WORKER = { concurrency: WORKER_DEFAULTS.provider_concurrency };
export const FLOOR_TOOL_WORKER = { concurrency: WORKER_DEFAULTS.tools_concurrency };

type FloorJob<T> = { name: string; data: T; opts: JobsOptions };

export function addJob<T>(queue: Queue, job: FloorJob<T>): Promise<unknown> {
  return queue.add(job.name, job.data, job.opts);
}

/** The channel the floor's last provider job publishes each finished run on. */
export const floorDoneChannel = (prefix: string) => `${hashTag(prefix)}:floor-done`;

/** Provider job `iteration` of a floor run, as arcflow would add it. */
export function floorProviderJob(run_id: string, iteration: number): FloorJob<ProviderJobData> {
  const data: ProviderJobData = { run_id, step_id: 's1', iteration, trace: TRACE };
  return { name: 'provider', data, opts: providerJobOptions(data, WORKER_DEFAULTS.provider_attempts) };
}

/** The definition hash the floor's tool jobs carry (a job's size is what matters here, not the value). */
const FLOOR_TOOL_DEFINITION_HASH = '0123456789abcdef';

/** Tool job `index` of a floor run's one round, as arcflow would add it. */
export function floorToolJob(run_id: string, index: number): FloorJob<ToolJobData> {
  const data: ToolJobData = {
    run_id,
    step_id: 's1',
    iteration: 1,
    index,
    tool_call_id: `c0_${index}`,
    definition_hash: FLOOR_TOOL_DEFINITION_HASH,
    tool_name: noop.name,
    args: { round: 0, index },
    input_size_bytes: 22,
    trace: TRACE,
    join: { queue: FLOOR_QUEUES.provider, attempts: WORKER_DEFAULTS.provider_attempts },
  };
  return { name: noop.name, data, opts: toolJobOptions(data, noop, WORKER_DEFAULTS.tool_backoff_ms) };
}
