import { usdOf } from '@arcflow/core';
import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.ts';

/** A UTC day, `YYYY-MM-DD`: what a tenant's daily budget and spend are kept by (SPEC §14). */
export function utcDay(now: number): string {
  return new Date(now).toISOString().slice(0, 10);
}

/** What `tenant` has spent in the UTC day of `now` (its settled calls), in USD. Loads no script. */
export async function spentOnDay(redis: Redis, keys: Keys, tenant: string, now: number): Promise<number> {
  return usdOf(Number((await redis.hget(keys.tenantSpend(tenant, utcDay(now)), 'spent')) ?? 0));
}
