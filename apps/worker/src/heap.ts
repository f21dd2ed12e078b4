import v8 from 'node:v8';
import { ConfigError } from 'arcflow';

/**
 * How far V8 lets a worker's heap grow past what survived its last full GC, in percent. A
 * worker keeps nothing between jobs, so what survives is small and steady (about 35 MiB); under
 * V8's own sizing, with a heap limit derived from the machine's memory, the old generation
 * instead grows for minutes before a full GC (RSS +33% from 1k to 10k runs). At 50% RSS stays
 * flat and CPU per run was 2–6% lower in paired trials (docs/architecture.md, "Worker memory").
 */
export const DEFAULT_HEAP_GROWING_PERCENT = 50;

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
