/**
 * Every metric arcflow records (SPEC §18), in one table: its name, kind, unit, what it counts,
 * and its histogram buckets. Names follow the OpenTelemetry GenAI semantic conventions where they
 * name a metric; the rest are arcflow's own. The attribute keys are below, and no others are ever
 * recorded: no run id, thread id or content.
 */
export const METER_NAME = 'arcflow';

/** Seconds of a model or tool call (the GenAI conventions' advice for `gen_ai.client.operation.duration`). */
const CALL_SECONDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
/** Tokens of one call (the conventions' advice for `gen_ai.client.token.usage`). */
const TOKENS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];
/** Seconds to a stream's first chunk (the conventions' advice). */
const FIRST_CHUNK_SECONDS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
/** Seconds a job waits for a worker: from milliseconds (a warm fleet) to minutes (a fleet scaling up). */
const WAIT_SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
/** Seconds of a step or a run: from a cached answer to an hour of tool rounds. */
const RUN_SECONDS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 3600];

export interface MetricDefinition {
  readonly name: string;
  readonly kind: 'histogram' | 'counter' | 'gauge';
  readonly unit: string;
  readonly description: string;
  readonly buckets?: readonly number[];
}

export const Metric = {
  operationDuration: {
    name: 'gen_ai.client.operation.duration',
    kind: 'histogram',
    unit: 's',
    description: 'Duration of each provider call',
    buckets: CALL_SECONDS,
  },
  tokenUsage: {
    name: 'gen_ai.client.token.usage',
    kind: 'histogram',
    unit: '{token}',
    description: 'Tokens of each provider call that reports usage, by type',
    buckets: TOKENS,
  },
  timeToFirstChunk: {
    name: 'gen_ai.client.operation.time_to_first_chunk',
    kind: 'histogram',
    unit: 's',
    description: 'Time from a streamed provider call to its first chunk',
    buckets: FIRST_CHUNK_SECONDS,
  },
  toolDuration: {
    name: 'gen_ai.execute_tool.duration',
    kind: 'histogram',
    unit: 's',
    description: 'Duration of each tool execution',
    buckets: CALL_SECONDS,
  },
  stepDuration: {
    name: 'gen_ai.invoke_agent.duration',
    kind: 'histogram',
    unit: 's',
    description: 'Duration of each agent step, from its start to its end',
    buckets: RUN_SECONDS,
  },
  runs: { name: 'arcflow.runs', kind: 'counter', unit: '{run}', description: 'Runs that ended, by status' },
  runDuration: {
    name: 'arcflow.run.duration',
    kind: 'histogram',
    unit: 's',
    description: 'Duration of each run that ended, from enqueue to end',
    buckets: RUN_SECONDS,
  },
  scheduleToStart: {
    name: 'arcflow.job.schedule_to_start',
    kind: 'histogram',
    unit: 's',
    description: 'Time a provider or tool job waited, from when it could run to when a worker started it',
    buckets: WAIT_SECONDS,
  },
  queueDepth: { name: 'arcflow.queue.depth', kind: 'gauge', unit: '{job}', description: 'Jobs in each queue, by state' },
  liveWorkers: { name: 'arcflow.workers.live', kind: 'gauge', unit: '{worker}', description: 'Workers connected to each queue' },
} as const satisfies Record<string, MetricDefinition>;

/** The only attribute keys a metric carries. */
export const MetricAttr = {
  operationName: 'gen_ai.operation.name',
  providerName: 'gen_ai.provider.name',
  requestModel: 'gen_ai.request.model',
  tokenType: 'gen_ai.token.type',
  toolName: 'gen_ai.tool.name',
  agentName: 'gen_ai.agent.name',
  errorType: 'error.type',
  agent: 'arcflow.agent',
  workflow: 'arcflow.workflow',
  status: 'arcflow.status',
  queue: 'arcflow.queue',
  jobKind: 'arcflow.job.kind',
  jobState: 'arcflow.job.state',
  tenant: 'arcflow.tenant',
} as const;

/** The states a queue's depth is reported in. */
export const QUEUE_STATES = ['waiting', 'active', 'delayed'] as const;

/** One queue as a collection reads it from Redis. */
export interface QueueReading {
  readonly queue: string;
  readonly waiting: number;
  readonly active: number;
  readonly delayed: number;
  readonly workers: number;
}

/** Runs ended, as counted in Redis by the script that ends each run (what `arcflow serve` reports). */
export interface RunCountReading {
  readonly kind: 'agent' | 'workflow';
  readonly name: string;
  readonly status: string;
  /** The runs' tenant, bounded: `default`, a tenant the workers' options name, or `_OTHER`. */
  readonly tenant: string;
  readonly count: number;
}
