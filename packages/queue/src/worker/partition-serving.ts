import type { Worker, WorkerOptions as BullWorkerOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import type { PartitionMap } from '../redis/partition-map.ts';
import { redisRefusal } from '../redis/connection.ts';
import { refusedConnection } from '../redis/tls-trust.ts';
import type { ResolvedWorkerOptions } from '../config/options.ts';
import { ownLocks } from '../watchdog/dead-workers.ts';

/**
 * The partitions this worker serves (SPEC §9) and the Workers it runs in each. The map is created
 * or grown to this worker's count; it serves every partition there is, or those of them that
 * `serve_partitions` names. Each queue's Workers are started in every partition served now and in
 * each one another worker adds later (see `follow`).
 */
export class PartitionServing {
  /** Every BullMQ Worker started, in every partition (see `add`). */
  readonly workers: Worker[] = [];
  /** Starts one queue's Worker in one partition's tag (capped tools' queues live under the prefix's tag only). */
  private readonly starts: ((tag: string) => void)[] = [];
  /** Workers whose concurrency is a share of a per-process budget. */
  private readonly shared: { worker: Worker; budget: number }[] = [];

  private constructor(
    private readonly map: PartitionMap,
    private readonly options: Pick<ResolvedWorkerOptions, 'serve_partitions' | 'logger'>,
    private tags: string[],
    private readonly owner: string,
  ) {}

  /** The partitions served from the start; a refusal that retrying will not change (an untrusted certificate) fails the start, not a silent wait. */
  static async start(map: PartitionMap, connection: Redis, options: ResolvedWorkerOptions, owner: string): Promise<PartitionServing> {
    const refusal = refusedConnection(connection, (error) => redisRefusal(error, options.redis));
    let tags: string[];
    try {
      tags = map.tagsOf(await Promise.race([map.ensure(options.partitions), refusal.refused]), options.serve_partitions);
    } catch (error) {
      connection.disconnect();
      throw redisRefusal(error, options.redis) ?? error;
    } finally {
      refusal.stop();
    }
    if (options.serve_partitions) options.logger.info('serving some partitions only', { partitions: [...options.serve_partitions].sort((a, b) => a - b) });
    return new PartitionServing(map, options, tags, owner);
  }

  /**
   * A BullMQ Worker just constructed: kept among `workers`, its locks naming this process (so that
   * other workers move its jobs back at once if it dies, see dead-workers.ts).
   */
  add(worker: Worker): void {
    ownLocks(worker, this.owner, this.workers.length);
    this.workers.push(worker);
  }

  /** Serves a queue: `start` runs for each partition's tag, once `startAll` runs and for each partition added later. */
  serve(start: (tag: string) => void): void {
    this.starts.push(start);
  }

  /**
   * One concurrency budget per process, whatever the number of partitions: each partition's
   * Worker of a queue gets an even share of it (at least 1), and shares shrink as partitions grow.
   */
  share(budget: number): number {
    return Math.max(1, Math.ceil(budget / this.tags.length));
  }

  /** A Worker whose concurrency is a share of `budget`, set again when partitions are added. */
  shareOf(worker: Worker, budget: number): void {
    this.shared.push({ worker, budget });
  }

  startAll(): void {
    for (const tag of this.tags) for (const start of this.starts) start(tag);
  }

  /** Partitions another worker added are served from now on (called each heartbeat). */
  async follow(): Promise<void> {
    const now = this.map.tagsOf(await this.map.read(), this.options.serve_partitions);
    const added = now.filter((tag) => !this.tags.includes(tag));
    if (added.length === 0) return;
    this.tags = now;
    for (const tag of added) for (const start of this.starts) start(tag);
    for (const { worker, budget } of this.shared) worker.concurrency = this.share(budget);
    this.options.logger.info('serving new partitions', { partitions: now.length - 1, added: added.length });
  }
}

/** What every queue's Workers share: the partitions they serve, BullMQ's settings, and how their errors are logged. */
export interface Serving {
  readonly partitions: PartitionServing;
  /** The settings every BullMQ Worker gets: the connection, its name (this worker's id: it names the Worker's blocking connection), locks, stalls, and finished jobs' retention. */
  readonly common: Pick<BullWorkerOptions, 'connection' | 'name' | 'lockDuration' | 'stalledInterval' | 'maxStalledCount' | 'removeOnComplete' | 'removeOnFail'>;
  /** A Worker's `error` handler: logged, except a lost connection (the connection's watch says that once). */
  logWorkerError(message: string, fields: Record<string, unknown>): (error: Error) => void;
}
