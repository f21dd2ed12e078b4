import type { ToolLogger } from '@arcflow/core';
import type { Redis } from 'ioredis';
import type { RunStore } from './run-store.ts';
import { failureFields } from './compaction.ts';

/** How often a worker looks for ended runs left uncompacted, and how long after its end a run is left to the process that ended it. */
export const COMPACTION_SWEEP = Object.freeze({ interval_ms: 5_000, grace_ms: 5_000, batch: 100 });

export interface CompactionSweepDeps {
  readonly store: RunStore;
  readonly redis: Redis;
  readonly logger: ToolLogger;
  readonly worker_id: string;
}

/**
 * Compacts ended runs whose ending process died (or failed) before compacting them
 * (docs/decisions/0031-compaction.md): every run that ends enters its partition's uncompacted set
 * and leaves it when compacted, so a run still there `grace_ms` after its end is compacted here,
 * within about `grace_ms + interval_ms` of its end. Every worker runs one; a lock lets one of them
 * sweep per round, and a compaction two processes race on is written once (compactRun checks the
 * run is not compacted yet, in the same step that compacts it).
 */
export class CompactionSweep {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<unknown> | undefined;

  constructor(private readonly deps: CompactionSweepDeps) {}

  start(): void {
    this.timer = setInterval(() => {
      this.sweeping ??= this.sweepOnce()
        .catch((error: unknown) => this.deps.logger.warn('compaction sweep failed', failureFields(error)))
        .finally(() => (this.sweeping = undefined));
    }, COMPACTION_SWEEP.interval_ms);
    this.timer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.sweeping;
  }

  /** One round, if no other worker holds its lock: how many runs it compacted. */
  async sweepOnce(): Promise<number> {
    const { store, redis, worker_id } = this.deps;
    const locked = await redis.set(store.keys.compactionSweepLock, worker_id, 'PX', COMPACTION_SWEEP.interval_ms, 'NX');
    if (locked !== 'OK') return 0;
    let compacted = 0;
    for (const run_id of await store.runs.compaction.uncompacted(COMPACTION_SWEEP.grace_ms, COMPACTION_SWEEP.batch)) {
      // One run that fails (Redis busy for a moment) stays in the set for the next round; the rest go on.
      const outcome = await store.runs.compaction.compaction(run_id).catch((error: unknown) => {
        this.deps.logger.warn('compacting an ended run failed', { run_id, ...failureFields(error) });
        return 'failed' as const;
      });
      if (outcome === 'compacted') compacted += 1;
      if (outcome === 'nothing') await store.runs.compaction.forget(run_id);
    }
    return compacted;
  }
}
