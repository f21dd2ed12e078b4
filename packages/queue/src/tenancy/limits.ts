import { RequestError, TERMINAL_STATUSES, type RunStatus } from '@arcflow/core';
import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';
import { DEFAULT_TENANT, type FairClock, type FairRedis } from './fair-clock.ts';
import type { TenantSettings } from './settings.ts';

/**
 * A tenant's limits (SPEC §14), enforced in Redis across every process of the prefix:
 * `runs_per_minute` at enqueue, `max_active_runs` when a run's first provider job is taken (a run
 * not admitted waits, `queued`, its job delayed). A run leaves its tenant's active set when it ends
 * in a process that knows (`release`), and, whatever ended it (a cancel, a crash), when a full set
 * is checked against the runs' records before a run is refused.
 */
export class TenantLimits {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly settings: TenantSettings,
    private readonly fair: FairClock,
  ) {}

  private get scripts(): FairRedis {
    return this.redis as unknown as FairRedis;
  }

  /** Counts an enqueue for `tenant` (absent: `default`); refuses it `tenant_rate_limited` when the tenant's minute is full. */
  async countEnqueue(tenant: string | undefined, now = Date.now()): Promise<void> {
    const name = tenant ?? DEFAULT_TENANT;
    const limit = (await this.settings.limitsOf(name)).runs_per_minute;
    if (limit === undefined) return;
    const minute = Math.floor(now / 60_000);
    if ((await this.scripts.arcflowCountEnqueue(this.keys.tenantMinute(name, minute), limit, 120)) === 1) return;
    const retry_after = Math.max(1, Math.ceil(((minute + 1) * 60_000 - now) / 1000));
    throw new RequestError('tenant_rate_limited', `tenant '${name}' has enqueued ${limit} runs this minute (its runs_per_minute); retry after ${retry_after} s`, retry_after);
  }

  /** Whether a run may start now: true unless its tenant has `max_active_runs` runs active (child runs always may: their parents wait for them). */
  async admit(run_id: string): Promise<boolean> {
    const { tenant } = await this.fair.ownerOf(run_id);
    const limit = (await this.settings.limitsOf(tenant)).max_active_runs;
    if (limit === undefined) return true;
    if (await this.redis.hexists(this.keys.record(run_id), 'parent_run_id')) return true;
    const active = this.keys.tenantActive(tenant);
    if ((await this.scripts.arcflowAdmitRun(active, run_id, limit)) === 1) return true;
    // Full: runs that ended without telling (cancelled, or their process died) leave, then ask again.
    if ((await this.pruneEnded(active)) === 0) return false;
    return (await this.scripts.arcflowAdmitRun(active, run_id, limit)) === 1;
  }

  /** A run ended: it leaves its tenant's active runs. */
  async release(run_id: string): Promise<void> {
    const { tenant } = await this.fair.ownerOf(run_id);
    await this.redis.srem(this.keys.tenantActive(tenant), run_id);
  }

  /** A tenant's active runs, those that ended removed. */
  async activeRuns(tenant: string): Promise<number> {
    const active = this.keys.tenantActive(tenant);
    await this.pruneEnded(active);
    return this.redis.scard(active);
  }

  /** Removes from a tenant's active set the runs whose record says they ended (or is gone); returns how many. */
  private async pruneEnded(active: string): Promise<number> {
    const members = await this.redis.smembers(active);
    const statuses = await Promise.all(members.map((run_id) => this.redis.hget(this.keys.record(run_id), 'status')));
    const ended = members.filter((_, at) => statuses[at] === null || TERMINAL_STATUSES.has(statuses[at] as RunStatus));
    if (ended.length > 0) await this.redis.srem(active, ...ended);
    return ended.length;
  }
}
