import { clusterNodes } from '../redis/connect.ts';
import { MAX_PARTITIONS } from '../redis/partition-map.ts';
import { type TenantOptions, checkTenantOptions } from '../tenancy/options.ts';
import {
  type Agent,
  ConfigError,
  type KnownKeys,
  type ModelProvider,
  type Pricing,
  type ToolLogger,
  type Workflow,
  checkKnownKeys,
  checkPricing,
  isPlainObject,
  stderrLogger,
} from '@arcflow/core';

/** Connection settings shared by the client and the workers. */
export interface ConnectionOptions {
  /** Redis URL (default `redis://127.0.0.1:6379`). */
  redis?: string;
  /** Key prefix (default `arcflow`): keys and queues live under the hash tag `{prefix}`, a run's under its partition's (`{prefix~p<k>~<n>}`) when there are several. */
  prefix?: string;
  /** How long finished runs and their jobs are kept, in seconds (default 7 days). */
  retention_seconds?: number;
}

export type WorkerRole = 'provider' | 'tools';

export interface WorkerOptions extends ConnectionOptions, TenantOptions {
  /** This worker's id in the registry and its log (default: a new `worker_…` id). */
  worker_id?: string;
  /** The agents (and workflows' agents) this worker serves. */
  agents: readonly (Agent | Workflow)[];
  /** The default model backend: the calls of agents that name no `provider` go to it. */
  provider?: ModelProvider;
  /**
   * Named model backends (SPEC §16): an agent with `provider: 'fast'` (or a fallback entry naming
   * it) makes its calls through `providers.fast`. A worker with the `provider` role refuses to
   * start when a served agent names one it does not hold.
   */
  providers?: Readonly<Record<string, ModelProvider>>;
  /** Each model's price in USD per million tokens (SPEC §14): calls of priced models report their cost and count against cost budgets. */
  pricing?: Pricing;
  /** Which jobs this process takes (default both). */
  roles?: readonly WorkerRole[];
  /** Serve only these tools (default: every tool of the served agents). */
  tools?: readonly string[];
  /** Jobs processed at once by this process, per role. */
  concurrency?: { provider?: number; tools?: number };
  /** Attempts per provider call for retryable errors (default 5). */
  provider_attempts?: number;
  /** Base delay of the provider backoff (default 1000 ms); exponential with jitter. */
  provider_backoff_ms?: number;
  /** Base delay between a tool's retries (default 500 ms). */
  tool_backoff_ms?: number;
  /** A job's lock; a killed worker's jobs are taken over after about this plus two stall intervals. */
  lock_duration_ms?: number;
  stalled_interval_ms?: number;
  max_stalled_count?: number;
  heartbeat_ms?: number;
  /**
   * A run that has made no progress for this long and has nothing queued or running that could
   * move it is repaired (its next job added again) or failed with `stalled` (default 60 000;
   * the worker process reads `ARCFLOW_WATCHDOG_MS`).
   */
  watchdog_ms?: number;
  /**
   * Partitions runs spread over (SPEC §9, `ARCFLOW_PARTITIONS`): the map under the prefix is
   * created or grown to this. Default 1 on one Redis, 16 on a cluster.
   */
  partitions?: number;
  /**
   * Serve only these partitions (numbers from 0; `ARCFLOW_SERVE_PARTITIONS`), so that a large fleet
   * splits them among groups of workers instead of every process running a BullMQ Worker per queue
   * for every partition. Default: every partition there is or has been. The prefix's own tag
   * (capped tools' queues, runs from before partitions) is served either way. A partition no running
   * worker serves does not move: see docs/deploy.md.
   */
  serve_partitions?: readonly number[];
  /** The model of a call whose agent (and run) name none; else the provider's own `defaultModel`. */
  default_model?: string;
  logger?: ToolLogger;
}

/** Every option `startWorker` takes: any other key is refused at start, naming it (SPEC §14). */
const WORKER_OPTION_KEYS = {
  redis: true,
  prefix: true,
  retention_seconds: true,
  tenant_weights: true,
  tenant_limits: true,
  tenant_budgets: true,
  worker_id: true,
  agents: true,
  provider: true,
  providers: true,
  pricing: true,
  roles: true,
  tools: true,
  concurrency: true,
  provider_attempts: true,
  provider_backoff_ms: true,
  tool_backoff_ms: true,
  lock_duration_ms: true,
  stalled_interval_ms: true,
  max_stalled_count: true,
  heartbeat_ms: true,
  watchdog_ms: true,
  partitions: true,
  serve_partitions: true,
  default_model: true,
  logger: true,
} as const satisfies KnownKeys<WorkerOptions>;

export const CONNECTION_DEFAULTS = Object.freeze({
  redis: 'redis://127.0.0.1:6379',
  prefix: 'arcflow',
  retention_seconds: 7 * 24 * 3600,
});

export const WORKER_DEFAULTS = Object.freeze({
  roles: Object.freeze(['provider', 'tools'] as WorkerRole[]),
  provider_concurrency: 16,
  tools_concurrency: 64,
  provider_attempts: 5,
  provider_backoff_ms: 1_000,
  provider_max_backoff_ms: 30_000,
  tool_backoff_ms: 500,
  lock_duration_ms: 5_000,
  stalled_interval_ms: 2_000,
  max_stalled_count: 2,
  heartbeat_ms: 5_000,
  watchdog_ms: 60_000,
  /** Partitions on a Redis Cluster unless ARCFLOW_PARTITIONS says otherwise. */
  cluster_partitions: 16,
  /** A worker whose heartbeat is older than this is not counted as serving its agents. */
  heartbeat_ttl_ms: 20_000,
  /** While Redis stays away, the worker says so again this often (with the address it tries). */
  redis_away_warn_ms: 10_000,
});

export interface ResolvedConnection {
  readonly redis: string;
  readonly prefix: string;
  readonly retention_seconds: number;
}

export function resolveConnection(options: ConnectionOptions = {}): ResolvedConnection {
  const prefix = options.prefix ?? CONNECTION_DEFAULTS.prefix;
  if (!/^[A-Za-z0-9_.-]+$/.test(prefix)) throw new ConfigError(`prefix must use letters, digits, _ . -, got ${JSON.stringify(prefix)}`);
  const retention_seconds = options.retention_seconds ?? CONNECTION_DEFAULTS.retention_seconds;
  positiveInteger('retention_seconds', retention_seconds);
  return Object.freeze({ redis: options.redis ?? CONNECTION_DEFAULTS.redis, prefix, retention_seconds });
}

export type ResolvedWorkerOptions = ReturnType<typeof resolveWorkerOptions>;

export function resolveWorkerOptions(options: WorkerOptions) {
  if (!isPlainObject(options)) throw new ConfigError('startWorker takes an options object ({ agents, redis?, prefix?, … })');
  checkKnownKeys(options, WORKER_OPTION_KEYS, 'the worker options', 'definition');
  const roles = options.roles ?? WORKER_DEFAULTS.roles;
  if (roles.length === 0 || roles.some((role) => role !== 'provider' && role !== 'tools')) {
    throw new ConfigError(`roles must be a non-empty list of 'provider' and 'tools', got ${JSON.stringify(roles)}`);
  }
  const providers = resolveProviders(options.providers);
  // Whether the provider role has the providers its agents use is the model router's check (checkProvidersHeld): it names the agent and the provider.
  const resolved = {
    ...resolveConnection(options),
    roles: [...roles],
    provider: options.provider,
    providers,
    tools: options.tools,
    provider_concurrency: options.concurrency?.provider ?? WORKER_DEFAULTS.provider_concurrency,
    tools_concurrency: options.concurrency?.tools ?? WORKER_DEFAULTS.tools_concurrency,
    provider_attempts: options.provider_attempts ?? WORKER_DEFAULTS.provider_attempts,
    provider_backoff_ms: options.provider_backoff_ms ?? WORKER_DEFAULTS.provider_backoff_ms,
    tool_backoff_ms: options.tool_backoff_ms ?? WORKER_DEFAULTS.tool_backoff_ms,
    lock_duration_ms: options.lock_duration_ms ?? WORKER_DEFAULTS.lock_duration_ms,
    stalled_interval_ms: options.stalled_interval_ms ?? WORKER_DEFAULTS.stalled_interval_ms,
    max_stalled_count: options.max_stalled_count ?? WORKER_DEFAULTS.max_stalled_count,
    heartbeat_ms: options.heartbeat_ms ?? WORKER_DEFAULTS.heartbeat_ms,
    watchdog_ms: options.watchdog_ms ?? WORKER_DEFAULTS.watchdog_ms,
    partitions: options.partitions ?? (clusterNodes(options.redis ?? CONNECTION_DEFAULTS.redis) ? WORKER_DEFAULTS.cluster_partitions : 1),
    serve_partitions: options.serve_partitions === undefined ? undefined : servedPartitions(options.serve_partitions),
    // Undefined: each call's provider's own default model (see requestFor).
    default_model: options.default_model,
    logger: options.logger ?? stderrLogger('arcflow.worker'),
    // Checked here, at start: a bad weight is refused naming it (SPEC §14).
    tenancy: checkTenantOptions(options),
    // Checked at start too: an unknown key or a bad price is refused naming it (SPEC §14).
    pricing: options.pricing === undefined ? undefined : checkPricing(options.pricing),
  };
  for (const key of [
    'provider_concurrency',
    'tools_concurrency',
    'provider_attempts',
    'lock_duration_ms',
    'stalled_interval_ms',
    'heartbeat_ms',
    'watchdog_ms',
    'partitions',
  ] as const) {
    positiveInteger(key, resolved[key]);
  }
  if (!Number.isInteger(resolved.max_stalled_count) || resolved.max_stalled_count < 0) {
    throw new ConfigError(`max_stalled_count must be an integer >= 0, got ${resolved.max_stalled_count}`);
  }
  return Object.freeze(resolved);
}

/** Named providers, each checked to be one (an object with an `id` and `complete`). */
function resolveProviders(providers: WorkerOptions['providers']): Readonly<Record<string, ModelProvider>> {
  if (providers === undefined) return Object.freeze({});
  if (providers === null || typeof providers !== 'object' || Array.isArray(providers)) throw new ConfigError('providers must be an object of named model providers');
  for (const [name, provider] of Object.entries(providers)) {
    if (typeof provider?.complete !== 'function' || typeof provider.id !== 'string' || provider.id === '') {
      throw new ConfigError(`providers.${name} must be a model provider (an object with an id and complete())`);
    }
  }
  return Object.freeze({ ...providers });
}

function servedPartitions(partitions: readonly number[]): ReadonlySet<number> {
  if (!Array.isArray(partitions) || partitions.length === 0) throw new ConfigError('serve_partitions must list at least one partition');
  for (const partition of partitions) {
    if (!Number.isInteger(partition) || partition < 0 || partition >= MAX_PARTITIONS) {
      throw new ConfigError(`serve_partitions must hold partition numbers from 0 to ${MAX_PARTITIONS - 1}, got ${JSON.stringify(partition)}`);
    }
  }
  return new Set(partitions);
}

function positiveInteger(key: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) throw new ConfigError(`${key} must be an integer >= 1, got ${JSON.stringify(value)}`);
}
