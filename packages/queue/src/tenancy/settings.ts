import type { Redis } from 'ioredis';
import { type TenantBudget, type TenantLimits, type TenantOptions, storedTenantOptions } from './options.ts';
import { StoredFormatError } from '../records/formats.ts';

/** How long a process uses the tenant settings it read before reading them again. */
const SETTINGS_TTL_MS = 5_000;

/** What the workers of a prefix say about tenants, stored under the prefix so every process (clients too) uses the same. */
export type StoredTenantSettings = TenantOptions;

/**
 * The tenant settings of a prefix (SPEC §14): written by each worker at start from its options
 * (workers of one prefix should agree), read by every process that adds jobs, clients included,
 * and read again after {@link SETTINGS_TTL_MS}.
 */
export class TenantSettings {
  private cached: { readonly at: number; readonly value: StoredTenantSettings } | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly key: string,
  ) {}

  /** Stores a worker's settings (its options, as given). */
  async publish(value: StoredTenantSettings): Promise<void> {
    await this.redis.set(this.key, JSON.stringify(value));
    this.cached = { at: Date.now(), value };
  }

  async read(): Promise<StoredTenantSettings> {
    if (this.cached && Date.now() - this.cached.at < SETTINGS_TTL_MS) return this.cached.value;
    const text = await this.redis.get(this.key);
    const value = text ? storedSettings(text, this.key) : {};
    this.cached = { at: Date.now(), value };
    return value;
  }

  /** A tenant's limits: its own, else `*`'s, else none. */
  async limitsOf(tenant: string): Promise<TenantLimits> {
    const limits = (await this.read()).tenant_limits ?? {};
    return own(limits, tenant) ?? own(limits, '*') ?? {};
  }

  /** A tenant's cost budget: its own, else `*`'s, else none. */
  async budgetOf(tenant: string): Promise<TenantBudget> {
    const budgets = (await this.read()).tenant_budgets ?? {};
    return own(budgets, tenant) ?? own(budgets, '*') ?? {};
  }

  /** A tenant's weight: its own, else `*`'s, else 1. */
  async weightOf(tenant: string): Promise<number> {
    const weights = (await this.read()).tenant_weights ?? {};
    return own(weights, tenant) ?? own(weights, '*') ?? 1;
  }
}

/** A tenant's own entry of `map`: a tenant named `constructor` or `toString` is a tenant, not a property every object inherits. */
function own<T>(map: Readonly<Record<string, T>>, tenant: string): T | undefined {
  return Object.hasOwn(map, tenant) ? map[tenant] : undefined;
}

/** Settings as a worker published them (see `storedTenantOptions`); what is not a JSON object (another process's write) is refused, naming the key. */
function storedSettings(text: string, key: string): StoredTenantSettings {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new StoredFormatError(`the tenant settings at ${key}`, 'malformed');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new StoredFormatError(`the tenant settings at ${key}`, 'malformed');
  return storedTenantOptions(value as Record<string, unknown>);
}
