import v8 from 'node:v8';
import { ConfigError } from '@arcflow/core';

/**
 * How far V8 lets a worker's heap grow past what survived its last full GC, in percent. A
 * worker keeps nothing between jobs, so what survives is small and steady (about 35 MiB); under
 * V8's own sizing, with a heap limit derived from the machine's memory, the old generation
 * instead grows for minutes before a full GC (RSS +33% from 1k to 10k runs). At 50% RSS stays
 * flat and CPU per run was 2–6% lower in paired trials (docs/architecture.md, "Worker memory").
 */
export const DEFAULT_HEAP_GROWING_PERCENT = 50;

/**
 * Node flags the worker process starts with. They size V8's young generation, which V8 fixes when
 * the process starts, so they cannot be set from inside it like the growth bound below. A run
 * allocates far more short-lived objects than a plain BullMQ job (events, store commands, job
 * objects); with 64 MiB of new space instead of V8's 32, more of them die before a scavenge
 * looks at them. Measured in alternating trials: +6–10% jobs/s and 2–7% less CPU per run with
 * one worker process, +8% with two; a plain BullMQ worker gains nothing from it
 * (docs/architecture.md, "Worker memory"). `spawnWorker` passes them, and the `arcflow` command's
 * shebang carries the same (a test keeps the two equal).
 */
export const WORKER_NODE_FLAGS: readonly string[] = Object.freeze(['--max-semi-space-size=32']);

/** `ARCFLOW_HEAP_GROWING_PERCENT`: an integer from 0 to 1000; 0 leaves V8's own sizing. */
export function heapGrowingPercent(value: string | undefined): number {
  if (value === undefined || value === '') return DEFAULT_HEAP_GROWING_PERCENT;
  const percent = Number(value);
  if (!Number.isInteger(percent) || percent < 0 || percent > 1000) {
    throw new ConfigError(`ARCFLOW_HEAP_GROWING_PERCENT must be an integer from 0 to 1000 (0: V8's own sizing), got '${value}'`);
  }
  return percent;
}

/**
 * Bounds the heap's growth for this process. V8 reads the factor at every full GC, so setting it
 * once the process runs takes effect from the next one (unlike the heap limit, which V8 fixes
 * at start).
 */
export function boundHeapGrowth(percent: number): void {
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}
