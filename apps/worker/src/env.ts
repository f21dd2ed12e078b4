import { ConfigError } from '@arcflow/core';
import { heapGrowingPercent } from './heap.ts';

/** Everything the worker reads from the environment, read once, here. */
export interface WorkerEnv {
  readonly redis: string | undefined;
  readonly prefix: string | undefined;
  readonly openai: { readonly api_key?: string; readonly base_url?: string } | undefined;
  readonly model: string | undefined;
  readonly otel: { readonly endpoint: string | undefined; readonly serviceName: string | undefined };
  /** How far the heap may grow past what survived the last full GC (see heap.ts). */
  readonly heapGrowingPercent: number;
  /** `ARCFLOW_WATCHDOG_MS`: how long a run may make no progress before the watchdog acts. */
  readonly watchdogMs: number | undefined;
  /** `ARCFLOW_PARTITIONS`: partitions runs spread over (default 1 on one Redis, 16 on a cluster). */
  readonly partitions: number | undefined;
}

export function readWorkerEnv(env: NodeJS.ProcessEnv = process.env): WorkerEnv {
  const api_key = env.OPENAI_API_KEY || undefined;
  const base_url = env.OPENAI_BASE_URL || undefined;
  return {
    redis: env.REDIS_URL || undefined,
    prefix: env.ARCFLOW_PREFIX || undefined,
    openai: api_key || base_url ? { api_key, base_url } : undefined,
    model: env.ARCFLOW_MODEL || undefined,
    otel: { endpoint: env.OTEL_EXPORTER_OTLP_ENDPOINT || undefined, serviceName: env.OTEL_SERVICE_NAME || undefined },
    heapGrowingPercent: heapGrowingPercent(env.ARCFLOW_HEAP_GROWING_PERCENT),
    watchdogMs: positiveIntegerEnv('ARCFLOW_WATCHDOG_MS', env.ARCFLOW_WATCHDOG_MS),
    partitions: positiveIntegerEnv('ARCFLOW_PARTITIONS', env.ARCFLOW_PARTITIONS),
  };
}

/** An optional positive integer setting; anything else is refused with the variable's name. */
function positiveIntegerEnv(name: string, value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const parsed = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(parsed) || parsed < 1) {
    throw new ConfigError(`${name} must be a whole number of milliseconds >= 1, got ${JSON.stringify(value)}`);
  }
  return parsed;
}
