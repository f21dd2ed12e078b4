import { ConfigError, type KnownKeys, checkKnownKeys, silentLogger } from '@arcflow/core';
import type { Redis } from 'ioredis';
import { connectRedis } from '../redis/connect.ts';
import { coalesceWrites } from '../redis/writes.ts';
import { type ConnectionHealth, watchConnection, withRedis } from '../redis/connection.ts';
import { type ConnectionOptions, WORKER_DEFAULTS, resolveConnection } from '../config/options.ts';
import { type AgentRegistration, Registry } from '../records/registry.ts';
import { RunStore } from '../runs/run-store.ts';
import { ThreadStore } from '../threads/thread-store.ts';
import { clientEnv } from './env.ts';

export interface ClientOptions extends ConnectionOptions {
  /** How long a call may wait for an unreachable Redis before it fails with `redis_unavailable` (default 5000). */
  redis_timeout_ms?: number;
}

export const CLIENT_DEFAULTS = Object.freeze({ redis_timeout_ms: 5_000 });

const CLIENT_OPTION_KEYS = { redis: true, prefix: true, retention_seconds: true, redis_timeout_ms: true } as const satisfies KnownKeys<ClientOptions>;

// Registrations are reused this long, saving a round trip per enqueue.
const REGISTRATION_CACHE_MS = 5_000;

/** What the client's modules share: its connection, store and registry, and how it reaches Redis. */
export interface ClientContext {
  readonly redis: Redis;
  readonly store: RunStore;
  readonly threads: ThreadStore;
  readonly registry: Registry;
  readonly prefix: string;
  /** An agent's registration, cached for a few seconds. */
  lookup(agent: string): Promise<AgentRegistration | undefined>;
  /** Runs an operation against Redis, failing with `redis_unavailable` when Redis stays away. */
  reach<T>(operation: () => Promise<T>): Promise<T>;
}

/** The context with what a reader's own connection needs: the address, the main connection's health, and the timeout. */
export interface OpenedClient extends ClientContext {
  readonly url: string;
  readonly health: ConnectionHealth;
  readonly timeoutMs: number;
}

/** Connects a client: options as given, else REDIS_URL and ARCFLOW_PREFIX. */
export function openClient(options: ClientOptions): OpenedClient {
  // Checked before connecting: a refused client leaves no connection open behind it.
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw new ConfigError('the client options must be an object');
  checkKnownKeys(options, CLIENT_OPTION_KEYS, 'the client options', 'definition', { url: 'redis' });
  const timeoutMs = options.redis_timeout_ms ?? CLIENT_DEFAULTS.redis_timeout_ms;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) throw new ConfigError(`redis_timeout_ms must be an integer >= 1, got ${JSON.stringify(timeoutMs)}`);
  const env = clientEnv();
  const connection = resolveConnection({ ...options, redis: options.redis ?? env.redis, prefix: options.prefix ?? env.prefix });
  // Commands never wait in a queue while Redis is away, and a command whose reply was lost is not
  // sent again: `reach` tries the whole operation again, so nothing runs after the caller was told
  // it failed. A restart shorter than `redis_timeout_ms` goes unnoticed.
  const redis = coalesceWrites(connectRedis(connection.redis, { maxRetriesPerRequest: 1, enableOfflineQueue: false, autoResendUnfulfilledCommands: false, lazyConnect: false }));
  const health = watchConnection(redis, connection.redis, silentLogger);
  const store = new RunStore(redis, connection.prefix, connection.retention_seconds);
  const registry = new Registry(redis, store.keys, WORKER_DEFAULTS.heartbeat_ttl_ms);
  const registrations = new Map<string, { registration: AgentRegistration; at: number }>();
  const lookup = async (agent: string): Promise<AgentRegistration | undefined> => {
    const cached = registrations.get(agent);
    if (cached && Date.now() - cached.at < REGISTRATION_CACHE_MS) return cached.registration;
    const registration = await registry.registration(agent);
    if (registration) registrations.set(agent, { registration, at: Date.now() });
    else registrations.delete(agent);
    return registration;
  };
  return {
    redis,
    store,
    threads: new ThreadStore(redis, store.keys, connection.prefix, store.partitions),
    registry,
    prefix: connection.prefix,
    lookup,
    reach: (operation) => withRedis(redis, connection.redis, timeoutMs, health, operation),
    url: connection.redis,
    health,
    timeoutMs,
  };
}
