import { checkTenantName } from '../tenancy/options.ts';
import type { ClientContext } from './context.ts';
import { spentOnDay } from '../cost/day.ts';
import { DEFAULT_TENANT } from '../tenancy/options.ts';

/** Where a tenant stands now (SPEC §14, `GET /v1/tenants/{tenant}`). */
export interface TenantStanding {
  readonly tenant: string;
  /** Its runs that have started and not ended (`running` or `waiting`), child runs included. */
  readonly active_runs: number;
  /** Its runs that wait to start (`queued`: behind its `max_active_runs`, on a thread, or not taken yet). */
  readonly queued_runs: number;
  /** What its settled provider calls cost in the current UTC day, in USD. */
  readonly cost_usd_today: number;
}

/** How many runs' records one pipelined read asks for. */
const BATCH = 500;

/**
 * A tenant's standing: its runs counted from every partition's set of runs not ended (each run's
 * record says its tenant, `default` when it names none, and its status), and its day's spend.
 * Reads every run not ended once: a request costs a read per active run of the prefix.
 */
export async function tenantStanding(context: ClientContext, tenant: string, now = Date.now()): Promise<TenantStanding> {
  checkTenantName('tenant', tenant);
  const { redis, store } = context;
  const keys = store.keys;
  const tags = await store.tags();
  const runs = (await Promise.all(tags.map((tag) => redis.zrange(keys.activeRunsIn(tag), 0, -1)))).flat();
  let active_runs = 0;
  let queued_runs = 0;
  for (let at = 0; at < runs.length; at += BATCH) {
    const pipeline = redis.pipeline();
    for (const run_id of runs.slice(at, at + BATCH)) pipeline.hmget(keys.record(run_id), 'tenant', 'status');
    for (const [, fields] of (await pipeline.exec()) ?? []) {
      const [owner, status] = (fields ?? []) as (string | null)[];
      if ((owner ?? DEFAULT_TENANT) !== tenant) continue;
      if (status === 'queued') queued_runs += 1;
      else if (status === 'running' || status === 'waiting') active_runs += 1;
    }
  }
  return { tenant, active_runs, queued_runs, cost_usd_today: await spentOnDay(redis, keys, tenant, now) };
}
