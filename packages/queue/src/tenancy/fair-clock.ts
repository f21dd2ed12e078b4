import type { Redis } from 'ioredis';
import type { Queue } from 'bullmq';
import { FairBatches, type FairBatchRedis } from './fair-batches.ts';
import { TENANCY_SCRIPTS } from './scripts.ts';
import type { TenantSettings } from './settings.ts';
import { DEFAULT_TENANT, storedOwner } from './options.ts';

export { DEFAULT_TENANT } from './options.ts';
/** A run's priority when it names none: 5 of 1 (first) … 10. */
export const DEFAULT_PRIORITY = 5;

/** Whose a job is, for fair scheduling: the run's tenant and its priority within the tenant. */
export interface JobOwner {
  readonly tenant: string;
  readonly priority: number;
}

/** Runs whose owner this process has read or written, kept while they are likely to add jobs again. */
const REMEMBERED_RUNS = 20_000;

/**
 * The fair clock of every queue this process adds provider and tool jobs to (SPEC §14; ADR 0029):
 * a job's BullMQ priority is its start tag in its tenant's virtual time, computed in Redis by
 * `fairPriority.lua` at the moment of the add, so BullMQ's own `ZPOPMIN` takes the tenants in turn.
 * The priorities asked for in one tick go to Redis together (`FairBatches`). A run's tenant and
 * priority are read once from its record and remembered.
 */
export class FairClock {
  private readonly owners = new Map<string, JobOwner>();
  private readonly batches: FairBatches;

  constructor(
    private readonly redis: Redis,
    private readonly settings: TenantSettings,
    private readonly recordKey: (run_id: string) => string,
  ) {
    this.batches = new FairBatches(redis);
  }

  /** Notes a run's owner (at enqueue, when the process knows it), saving the record read. */
  remember(run_id: string, owner: { readonly tenant?: string | undefined; readonly priority?: number | undefined }): void {
    if (this.owners.size >= REMEMBERED_RUNS) this.owners.delete(this.owners.keys().next().value!);
    this.owners.set(run_id, { tenant: owner.tenant ?? DEFAULT_TENANT, priority: owner.priority ?? DEFAULT_PRIORITY });
  }

  /** A run's tenant and priority (a run that names none: `default`, 5). */
  async ownerOf(run_id: string): Promise<JobOwner> {
    return this.owners.get(run_id) ?? (await this.readOwner(run_id));
  }

  /** The record fields a child run takes from its parent: the parent's tenant and priority, as the parent's record has them. */
  async inherited(parent_run_id: string): Promise<{ tenant?: string; priority?: number }> {
    const owner = await this.ownerOf(parent_run_id);
    return {
      ...(owner.tenant !== DEFAULT_TENANT ? { tenant: owner.tenant } : {}),
      ...(owner.priority !== DEFAULT_PRIORITY ? { priority: owner.priority } : {}),
    };
  }

  /** The BullMQ priority of job `job_id` of `run_id`, about to be added to `queue`. */
  async priority(queue: Queue, run_id: string, job_id: string): Promise<number> {
    const owner = await this.ownerOf(run_id);
    const weight = await this.settings.weightOf(owner.tenant);
    return this.batches.take(queue, job_id, owner.tenant, owner.priority, 1 / weight);
  }

  private async readOwner(run_id: string): Promise<JobOwner> {
    const [tenant, priority] = await this.redis.hmget(this.recordKey(run_id), 'tenant', 'priority');
    // A record another process wrote to: its run is the default tenant's, at the default priority, rather than failing every add it shares a batch with.
    this.remember(run_id, storedOwner(tenant, priority));
    return this.owners.get(run_id)!;
  }

  /** Defines the tenancy scripts on a connection (once per connection). */
  static define(redis: Redis): void {
    if ((redis as Partial<FairRedis>).arcflowFairPriority) return;
    redis.defineCommand('arcflowFairPriority', TENANCY_SCRIPTS.fairPriority);
    redis.defineCommand('arcflowAdmitRun', TENANCY_SCRIPTS.admitRun);
    redis.defineCommand('arcflowCountEnqueue', TENANCY_SCRIPTS.countEnqueue);
  }
}

/** The tenancy scripts, as `define` names them on a connection. */
export interface FairRedis extends FairBatchRedis {
  arcflowAdmitRun(active: string, run_id: string, limit: number): Promise<number>;
  arcflowCountEnqueue(counter: string, limit: number, ttlSeconds: number): Promise<number>;
}
