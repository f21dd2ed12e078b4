import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';

/** A job whose priority was asked for: its id, its tenant, its level, its tenant's stride. */
interface Ask {
  readonly job_id: string;
  readonly tenant: string;
  readonly level: number;
  readonly stride: number;
  readonly resolve: (priority: number) => void;
  readonly reject: (error: unknown) => void;
}

/** The jobs of one queue whose priorities were asked for in the same tick, in order. */
interface Batch {
  readonly queue: Queue;
  readonly asks: Ask[];
}

/** The most jobs one call of `fairPriority.lua` takes (its own bound). */
const MOST_PER_CALL = 1000;

/**
 * The fair priorities asked for in one tick, one `fairPriority.lua` call per queue: a round's
 * tool jobs, or the runs a client enqueues at once, take their tags in one read and one write of
 * the queue's clock instead of one script call each. The script gives the tags the calls in turn
 * would give, in the order asked, so batching changes no job's place.
 */
export class FairBatches {
  private pending = new Map<string, Batch>();
  /** Batches of this tick that reached MOST_PER_CALL: sent as they are. */
  private full: Batch[] = [];
  private scheduled = false;

  constructor(private readonly redis: Redis) {}

  /** The priority of job `job_id` of `tenant` at `level` in `queue`, given with the others asked for in this tick. */
  take(queue: Queue, job_id: string, tenant: string, level: number, stride: number): Promise<number> {
    let batch = this.pending.get(queue.qualifiedName);
    if (batch && batch.asks.length >= MOST_PER_CALL) {
      this.full.push(batch);
      batch = undefined;
    }
    if (!batch) {
      batch = { queue, asks: [] };
      this.pending.set(queue.qualifiedName, batch);
    }
    const asks = batch.asks;
    if (!this.scheduled) {
      this.scheduled = true;
      // After the microtasks of this tick: every add its callers start now joins the batch.
      process.nextTick(() => this.flush());
    }
    return new Promise((resolve, reject) => asks.push({ job_id, tenant, level, stride, resolve, reject }));
  }

  private flush(): void {
    const batches = [...this.full, ...this.pending.values()];
    this.pending = new Map();
    this.full = [];
    this.scheduled = false;
    for (const batch of batches) void this.send(batch);
  }

  private async send({ queue, asks }: Batch): Promise<void> {
    try {
      const priorities = await (this.redis as unknown as FairBatchRedis).arcflowFairPriority(
        queue.toKey('arcflow-fair'),
        queue.keys.prioritized!,
        queue.toKey(''),
        ...asks.flatMap((ask) => [ask.job_id, ask.tenant, ask.level, ask.stride]),
      );
      for (const [index, ask] of asks.entries()) ask.resolve(Number(priorities[index]));
    } catch (error) {
      for (const ask of asks) ask.reject(error);
    }
  }
}

/** `fairPriority.lua` as `FairClock.define` names it on a connection: a job prefix, then (job id, tenant, level, stride) per job. */
export interface FairBatchRedis {
  arcflowFairPriority(clock: string, prioritized: string, jobPrefix: string, ...jobs: (string | number)[]): Promise<number[]>;
}
