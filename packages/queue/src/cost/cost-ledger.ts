import {
  type CallCost,
  type Pricing,
  type ProviderRequest,
  type RunSpent,
  type StepSettings,
  callCost,
  dollars,
  microsOf,
  runCostCap,
  runCostRefusal,
  unpricedRefusal,
} from '@arcflow/core';
import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';
import { DEFAULT_TENANT, type FairClock } from '../tenancy/fair-clock.ts';
import type { TenantSettings } from '../tenancy/settings.ts';
import { COST_SCRIPTS } from './scripts.ts';
import { spentOnDay, utcDay } from './day.ts';

/** How long a tenant's day of spend (and a run's holds) is kept after its last change: two days, so a day is read whole. */
export const COST_KEY_TTL_SECONDS = 48 * 3600;

/** A call's place: its hold is the call's, reused by every try, retry and re-delivery of it. */
export interface CallPlace {
  readonly run_id: string;
  readonly step_id: string;
  readonly iteration: number;
}

/** What reserving a call's worst case gave: held (or nothing to hold: its model is not priced and no cost budget applies), or refused. */
export type Reservation = { readonly cost: CallCost } | { readonly refused: string };

/**
 * A prefix's cost accounting (SPEC §14; docs/decisions/0033-cost-budgets.md): before a provider
 * call, its worst case is held against the run's `max_cost_usd` and its tenant's
 * `max_cost_usd_per_day` in one Lua step (`reserveCost.lua`), across every worker; the call's true
 * cost replaces the hold once (`settleCost.lua`). Amounts are whole micro-dollars in Redis
 * (`HINCRBY`), shown as dollars.
 */
export class CostLedger {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly settings: TenantSettings,
    private readonly fair: FairClock,
  ) {
    if (!(redis as Partial<CostRedis>).arcflowReserveCost) {
      redis.defineCommand('arcflowReserveCost', COST_SCRIPTS.reserveCost);
      redis.defineCommand('arcflowSettleCost', COST_SCRIPTS.settleCost);
    }
  }

  private get scripts(): CostRedis {
    return this.redis as unknown as CostRedis;
  }

  /** Holds the worst case of `request` for the call at `place`, or says why it does not fit (the call is then not made). */
  async reserve(place: CallPlace, pricing: Pricing | undefined, settings: StepSettings, spent: RunSpent, request: ProviderRequest, now = Date.now()): Promise<Reservation> {
    const cost = callCost(pricing, request);
    const { tenant } = await this.fair.ownerOf(place.run_id);
    const daily = (await this.settings.budgetOf(tenant)).max_cost_usd_per_day;
    if (!cost.price) {
      const run = runCostRefusal(settings, spent, cost);
      if (run) return { refused: run };
      return daily === undefined ? { cost } : { refused: unpricedRefusal(cost.model, `tenant '${tenant}''s max_cost_usd_per_day`) };
    }
    const runCap = runCostCap(settings);
    const dayCap = daily === undefined ? undefined : microsOf(daily);
    const [outcome, which, used] = await this.scripts.arcflowReserveCost(
      this.keys.runCost(place.run_id),
      this.keys.tenantSpend(tenant, utcDay(now)),
      holdOf(place),
      cost.worst_micros,
      runCap ?? -1,
      spent.cost_micros ?? 0,
      dayCap ?? -1,
      COST_KEY_TTL_SECONDS,
    );
    if (outcome !== 0) return { cost };
    const worst = `the next call to '${cost.model}' could cost up to ${dollars(cost.worst_micros)}`;
    if (which === 'run')
      return { refused: `the run's max_cost_usd is ${dollars(runCap!)}: it has spent ${dollars(Number(used))} (calls in flight included) and ${worst}; the call was not made` };
    return {
      refused: `tenant '${tenant}' has spent ${dollars(Number(used))} today (calls in flight included) of its max_cost_usd_per_day, ${dollars(dayCap!)}, and ${worst}; the call was not made`,
    };
  }

  /** Replaces the call's hold by its true cost (0: the call was never answered), once. */
  async settle(place: CallPlace, cost_micros: number): Promise<void> {
    await this.scripts.arcflowSettleCost(this.keys.runCost(place.run_id), holdOf(place), cost_micros, COST_KEY_TTL_SECONDS);
  }

  /** What `tenant` has spent in the UTC day of `now` (settled calls), in USD. */
  async spentToday(tenant: string = DEFAULT_TENANT, now = Date.now()): Promise<number> {
    return spentOnDay(this.redis, this.keys, tenant, now);
  }
}

function holdOf(place: CallPlace): string {
  return `${place.step_id}|${place.iteration}`;
}

/** The cost scripts, as the constructor names them on a connection. */
interface CostRedis {
  arcflowReserveCost(
    holds: string,
    day: string,
    hold: string,
    amount: number,
    runCap: number,
    runSpent: number,
    dayCap: number,
    ttlSeconds: number,
  ): Promise<[number, string?, number?]>;
  arcflowSettleCost(holds: string, hold: string, cost: number, ttlSeconds: number): Promise<number>;
}
