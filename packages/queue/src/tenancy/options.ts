import { ConfigError, RequestError, TENANT_PATTERN, tenantNameProblem } from '@arcflow/core';

/** The tenant of a run that names none (SPEC §14). */
export const DEFAULT_TENANT = 'default';

/** The tenant options of a worker (SPEC §14), as given. */
export interface TenantOptions {
  /** Each tenant's share of every queue, relative to the others' (default 1; `*` for every tenant not named). */
  readonly tenant_weights?: Readonly<Record<string, number>>;
  /** Each tenant's limits (`*` for every tenant not named), enforced in Redis across workers. */
  readonly tenant_limits?: Readonly<Record<string, TenantLimits>>;
  /** Each tenant's cost budget (`*` for every tenant not named), enforced in Redis across workers. */
  readonly tenant_budgets?: Readonly<Record<string, TenantBudget>>;
}

/** A tenant's cost budget (SPEC §14). */
export interface TenantBudget {
  /** USD the tenant's provider calls may cost in one UTC day; a call whose worst case does not fit is refused `budget_exceeded`. */
  readonly max_cost_usd_per_day?: number;
}

/** A tenant's limits (SPEC §14). */
export interface TenantLimits {
  /** Runs of the tenant running at once; the rest wait `queued`. */
  readonly max_active_runs?: number;
  /** Enqueues of the tenant per minute; the rest are refused `tenant_rate_limited`. */
  readonly runs_per_minute?: number;
}

/** A run's priority (SPEC §14): an integer from 1 (first) to 10. */
export function isPriority(value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= 1 && (value as number) <= 10;
}

/** A run's tenant and priority as its record holds them; what another process wrote there that is neither reads as none. */
export function storedOwner(tenant: string | null | undefined, priority: string | null | undefined): { tenant?: string; priority?: number } {
  const level = priority ? Number(priority) : undefined;
  return { ...(tenant && TENANT_PATTERN.test(tenant) ? { tenant } : {}), ...(isPriority(level) ? { priority: level } : {}) };
}

/** Refuses a request whose `field` is not a tenant name, naming the field (`invalid_request`). */
export function checkTenantName(field: string, value: unknown): asserts value is string {
  const problem = tenantNameProblem(field, value);
  if (problem) throw new RequestError('invalid_request', problem);
}

const LIMIT_KEYS = ['max_active_runs', 'runs_per_minute'] as const;

/** The weights a tenant may have: shares from 1/1000 to 1000 of a weight-1 tenant's. */
const WEIGHT_RANGE = { min: 0.001, max: 1_000 } as const;

const isWeight = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value) && value >= WEIGHT_RANGE.min && value <= WEIGHT_RANGE.max;
const isLimit = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 1;
const isUsd = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value) && value >= 0;
/** A tenant name, or `*` (every tenant not named). */
const isTenantKey = (key: string) => key === '*' || TENANT_PATTERN.test(key);
const isMap = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

function checkTenantKey(option: string, key: string): void {
  if (!isTenantKey(key)) throw new ConfigError(`${option}: '${key.slice(0, 140)}' is not a tenant name (${TENANT_PATTERN}) or '*'`);
}

function checkObject(option: string, value: unknown): asserts value is Record<string, unknown> {
  if (!isMap(value)) throw new ConfigError(`${option} must be an object keyed by tenant`);
}

/** The entries of a stored map (`tenant → value`) whose key is a tenant's and whose value `keep` gives. */
function keptEntries<T>(map: unknown, keep: (value: unknown) => T | undefined): Record<string, T> | undefined {
  if (!isMap(map)) return undefined;
  const kept: Record<string, T> = {};
  for (const [tenant, value] of Object.entries(map)) {
    const taken = isTenantKey(tenant) ? keep(value) : undefined;
    if (taken !== undefined) Object.defineProperty(kept, tenant, { value: taken, enumerable: true, writable: true, configurable: true });
  }
  return kept;
}

/**
 * Tenant options as a worker stored them, read by every process: what this version knows and
 * can use of them. A key or value it does not know (a newer worker's, during a rolling upgrade)
 * is left out rather than refused, so that older processes go on adding jobs.
 */
export function storedTenantOptions(stored: Record<string, unknown>): TenantOptions {
  const limitsOf = (limits: unknown) => {
    if (!isMap(limits)) return undefined;
    const known = Object.fromEntries(LIMIT_KEYS.filter((key) => isLimit(limits[key])).map((key) => [key, limits[key] as number]));
    return known as TenantLimits;
  };
  const budgetOf = (budget: unknown) => (isMap(budget) && isUsd(budget.max_cost_usd_per_day) ? { max_cost_usd_per_day: budget.max_cost_usd_per_day } : undefined);
  const tenant_weights = keptEntries(stored.tenant_weights, (weight) => (isWeight(weight) ? weight : undefined));
  const tenant_limits = keptEntries(stored.tenant_limits, limitsOf);
  const tenant_budgets = keptEntries(stored.tenant_budgets, budgetOf);
  return { ...(tenant_weights ? { tenant_weights } : {}), ...(tenant_limits ? { tenant_limits } : {}), ...(tenant_budgets ? { tenant_budgets } : {}) };
}

/** The tenant options checked at start: an unknown tenant name or a bad value is refused, naming it. */
export function checkTenantOptions(options: TenantOptions): TenantOptions {
  const { tenant_weights } = options;
  if (tenant_weights !== undefined) {
    checkObject('tenant_weights', tenant_weights);
    for (const [tenant, weight] of Object.entries(tenant_weights)) {
      checkTenantKey('tenant_weights', tenant);
      if (!isWeight(weight)) {
        throw new ConfigError(`tenant_weights.${tenant}: expected a number from ${WEIGHT_RANGE.min} to ${WEIGHT_RANGE.max}, got ${JSON.stringify(weight)?.slice(0, 40)}`);
      }
    }
  }
  const { tenant_limits } = options;
  if (tenant_limits !== undefined) {
    checkObject('tenant_limits', tenant_limits);
    for (const [tenant, limits] of Object.entries(tenant_limits)) {
      checkTenantKey('tenant_limits', tenant);
      checkObject(`tenant_limits.${tenant}`, limits);
      for (const [key, value] of Object.entries(limits)) {
        if (!(LIMIT_KEYS as readonly string[]).includes(key)) throw new ConfigError(`tenant_limits.${tenant}: unknown key '${key.slice(0, 60)}' (keys: ${LIMIT_KEYS.join(', ')})`);
        if (!isLimit(value)) throw new ConfigError(`tenant_limits.${tenant}.${key}: expected a whole number of at least 1, got ${JSON.stringify(value)?.slice(0, 40)}`);
      }
    }
  }
  const { tenant_budgets } = options;
  if (tenant_budgets !== undefined) checkTenantBudgets(tenant_budgets);
  return {
    ...(tenant_weights !== undefined ? { tenant_weights } : {}),
    ...(tenant_limits !== undefined ? { tenant_limits } : {}),
    ...(tenant_budgets !== undefined ? { tenant_budgets } : {}),
  };
}

function checkTenantBudgets(tenant_budgets: unknown): void {
  checkObject('tenant_budgets', tenant_budgets);
  for (const [tenant, budget] of Object.entries(tenant_budgets)) {
    checkTenantKey('tenant_budgets', tenant);
    checkObject(`tenant_budgets.${tenant}`, budget);
    for (const [key, value] of Object.entries(budget)) {
      if (key !== 'max_cost_usd_per_day') throw new ConfigError(`tenant_budgets.${tenant}: unknown key '${key.slice(0, 60)}' (keys: max_cost_usd_per_day)`);
      if (!isUsd(value)) throw new ConfigError(`tenant_budgets.${tenant}.${key}: expected a number of USD >= 0, got ${JSON.stringify(value)?.slice(0, 40)}`);
    }
  }
}

/**
 * The tenants the options name (SPEC §14), `default` among them: the keys, other than `*`, of
 * every option named `tenant_*` whose value is an object keyed by tenant (weights, limits,
 * budgets, and any such option added later). What metrics record a run's tenant by (SPEC §18):
 * a tenant not named is `_OTHER`.
 */
export function namedTenants(options: TenantOptions): Set<string> {
  const names = new Set<string>([DEFAULT_TENANT]);
  for (const [option, value] of Object.entries(options)) {
    if (!option.startsWith('tenant_') || value === null || typeof value !== 'object' || Array.isArray(value)) continue;
    for (const tenant of Object.keys(value)) if (tenant !== '*') names.add(tenant);
  }
  return names;
}
