import type { Redis } from 'ioredis';
import { closeRedis } from '../redis/connection.ts';
import { keysFor } from '../redis/keys.ts';
import { connectRedis } from '../redis/connect.ts';
import { Registry } from '../records/registry.ts';
import { PartitionMap } from '../redis/partition-map.ts';
import { WORKER_DEFAULTS } from '../config/options.ts';
import { TenantSettings } from '../tenancy/settings.ts';
import { namedTenants } from '../tenancy/options.ts';
import { type CollectedReadings, type QueueLayout, collectReadings } from './queue-readings.ts';

/** How long the deployment's queue names (read from the registry) are reused before they are read again. */
const NAMES_REREAD_MS = 10_000;
/** How long a collection waits for the reader's connection (the first scrape, or Redis coming back). */
const CONNECT_WAIT_MS = 2_000;

export interface MetricsReaderOptions {
  /** `REDIS_URL`. */
  readonly redis: string;
  readonly prefix: string;
  /** The queues to read (a worker's own); without them, every queue registered under the prefix (`arcflow serve`). */
  readonly queues?: readonly string[];
  /** Read the deployment's run counts too (`arcflow serve`), by the tenants the workers published (the rest `_OTHER`). */
  readonly runs?: boolean;
}

/** Reads what a collection reports, on a connection of its own. */
export interface MetricsReader {
  read(): Promise<CollectedReadings>;
  close(): Promise<void>;
}

/**
 * The Redis side of a process's observable metrics: a connection of its own that fails fast
 * (a scrape while Redis is away answers without the gauges instead of hanging), the partitions'
 * tags and the queue names kept a few seconds, and {@link collectReadings} for the one round trip
 * each collection makes.
 */
export function openMetricsReader(options: MetricsReaderOptions): MetricsReader {
  const redis: Redis = connectRedis(options.redis, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: false, connectionName: 'arcflow:metrics' });
  redis.on('error', () => undefined); // a failed collection reports nothing; the worker's own connection reports Redis going away
  const keys = keysFor(options.prefix);
  const partitions = new PartitionMap(redis, keys, options.prefix);
  const registry = new Registry(redis, keys, WORKER_DEFAULTS.heartbeat_ttl_ms);
  const tenantSettings = new TenantSettings(redis, keys.tenancy);
  let names: { list: readonly string[]; at: number } | undefined = options.queues ? { list: options.queues, at: Number.POSITIVE_INFINITY } : undefined;
  const queueNames = async (): Promise<readonly string[]> => {
    if (names && Date.now() - names.at < NAMES_REREAD_MS) return names.list;
    const list = await registry.queueNames();
    names = { list, at: Date.now() };
    return list;
  };
  const layout = async (): Promise<QueueLayout> => {
    const [list, state] = await Promise.all([queueNames(), partitions.read()]);
    return { names: list, tags: partitions.tagsOf(state) };
  };
  // Commands fail at once while disconnected (no offline queue): a collection waits a moment for the connection first.
  const connected = async () => {
    if (redis.status === 'ready') return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, CONNECT_WAIT_MS);
      function done() {
        clearTimeout(timer);
        redis.off('ready', done);
        resolve();
      }
      redis.once('ready', done);
    });
  };
  return {
    read: async () => {
      await connected();
      if (!options.runs) return collectReadings(redis, await layout());
      const [queues, settings] = await Promise.all([layout(), tenantSettings.read()]);
      return collectReadings(redis, queues, { runs: true, tenants: namedTenants(settings) });
    },
    close: () => closeRedis(redis),
  };
}
