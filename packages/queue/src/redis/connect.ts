import { createRequire } from 'node:module';
import { ConfigError } from '@arcflow/core';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { redactUrl } from './connection.ts';
import { reportUntrustedCertificates } from './tls-trust.ts';

/**
 * The nodes of a `REDIS_URL` that lists several (`redis://a:6379,redis://b:6379`): a Redis
 * Cluster; undefined for a single URL. Each node's URL must be complete; a password on any node
 * is used for all (a cluster has one), and `rediss:` on every node means TLS to every node.
 */
export function clusterNodes(url: string): { host: string; port: number; password?: string; username?: string; tls: boolean }[] | undefined {
  const parts = url
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
  if (parts.length < 2) return undefined;
  const nodes = parts.map((part) => {
    let parsed: URL;
    try {
      parsed = new URL(part);
    } catch {
      throw new ConfigError(`REDIS_URL lists a node that is not a URL: ${part.replace(/\/\/([^@/]*)@/, '//***@')}`);
    }
    if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') throw new ConfigError(`REDIS_URL node ${parsed.host}: the scheme must be redis: or rediss:`);
    return {
      host: parsed.hostname,
      port: Number(parsed.port || 6379),
      tls: parsed.protocol === 'rediss:',
      ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
      ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    };
  });
  if (new Set(nodes.map((node) => node.tls)).size > 1)
    throw new ConfigError('REDIS_URL lists nodes with both redis: and rediss:; every node of a cluster speaks TLS (rediss:) or none does');
  return nodes;
}

/** The schemes a Redis URL may have; a URL with none (`host:port`, a socket's path) is taken as ioredis takes it. */
const REDIS_SCHEMES = new Set(['redis', 'rediss', 'unix']);

/**
 * Refuses at once a Redis URL with another scheme (`http://…`, which ioredis would take for the
 * path of a socket and report as `ENOENT` after the client's timeout), naming what is expected.
 */
export function checkRedisScheme(url: string): void {
  for (const part of url.split(',')) {
    const scheme = /^\s*([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(part)?.[1];
    if (scheme === undefined || REDIS_SCHEMES.has(scheme.toLowerCase())) continue;
    throw new ConfigError(
      `the Redis URL ${redactUrl(part.trim())} has the scheme '${scheme}:'; expected redis://host:port, rediss://host:port (TLS), or a unix socket's path (unix:///path/redis.sock or /path/redis.sock)`,
    );
  }
}

/**
 * A connection to the Redis that `url` names: one server, or with several nodes listed, an
 * ioredis `Cluster` over them (SPEC §9). Every key of a run shares one hash tag, so its scripts
 * and its BullMQ jobs stay in one slot either way. Typed as `Redis`: the engine uses only what
 * both offer (commands, scripts, pub/sub, `duplicate`, `status` and the connection events).
 */
export function connectRedis(url: string, options: RedisOptions = {}): Redis {
  checkRedisScheme(url);
  const nodes = clusterNodes(url);
  if (!nodes) return refusingMissingDatabase(new Redis(url, options));
  const { password, username } = nodes.find((node) => node.password) ?? {};
  const { enableOfflineQueue, ...redisOptions } = options;
  // As ioredis does for one `rediss:` URL: TLS with the default trust (NODE_EXTRA_CA_CERTS adds a CA).
  const tls = redisOptions.tls ?? (nodes.some((node) => node.tls) ? {} : undefined);
  const cluster = new Cluster(
    nodes.map(({ host, port }) => ({ host, port })),
    {
      redisOptions: { ...redisOptions, ...(password ? { password } : {}), ...(username ? { username } : {}), ...(tls ? { tls, Connector: guardedTlsConnector() } : {}) },
      // Over TLS, a node is reached by the name it was listed with, which its certificate names (a
      // managed cluster's configuration endpoint), not by the address that name resolves to.
      ...(tls ? { dnsLookup: (address: string, callback: (error: null, address: string) => void) => callback(null, address) } : {}),
      ...(enableOfflineQueue !== undefined ? { enableOfflineQueue } : {}),
      ...(options.lazyConnect !== undefined ? { lazyConnect: options.lazyConnect } : {}),
    },
  );
  if (tls) reportUntrustedCertificates(cluster, nodes[0]!, tls);
  return cluster as unknown as Redis;
}

/**
 * A second connection like `redis`, with `options` over its own, for subscribing: on a cluster,
 * one whose sharded subscriptions (run-finished notices, event tails) go to the node of each
 * channel's slot.
 */
export function duplicateRedis(redis: Redis, options: RedisOptions = {}): Redis {
  // No ready check (INFO) on a subscriber: ioredis sends a (S)SUBSCRIBE at once while the
  // connection is still being set up, and if its reply comes first, the INFO that follows is
  // refused in subscriber mode, which fails the connection and every subscription in flight.
  if (!((redis as unknown) instanceof Cluster)) return redis.duplicate({ enableReadyCheck: false, ...options });
  const cluster = redis as unknown as Cluster;
  const { enableOfflineQueue, ...redisOptions } = options;
  return cluster.duplicate([], {
    ...(enableOfflineQueue !== undefined ? { enableOfflineQueue } : {}),
    shardedSubscribers: true,
    redisOptions: { ...cluster.options.redisOptions, ...redisOptions },
  }) as unknown as Redis;
}

type ConnectorClass = NonNullable<RedisOptions['Connector']>;
let guarded: ConnectorClass | undefined;

/**
 * ioredis's own connector, whose TLS sockets keep an `error` listener for life. A cluster client
 * that gives up on a node mid-handshake (a certificate not trusted) leaves its socket with none,
 * and the server's alert that follows would be an uncaught exception.
 */
function guardedTlsConnector(): ConnectorClass {
  if (guarded) return guarded;
  const Standalone = createRequire(import.meta.url)('ioredis/built/connectors/StandaloneConnector.js').default as new (
    options: RedisOptions,
  ) => { connect(onError: unknown): Promise<NodeJS.EventEmitter> };
  class GuardedConnector extends Standalone {
    override async connect(onError: unknown): Promise<NodeJS.EventEmitter> {
      const stream = await super.connect(onError);
      stream.on('error', () => undefined); // ioredis's own listener reports the first error
      return stream;
    }
  }
  guarded = GuardedConnector as unknown as ConnectorClass;
  return guarded;
}

/**
 * A URL's database (`redis://host:6379/3`) that the Redis does not have: ioredis reports the
 * refused `SELECT` and goes on in database 0. The connection is closed instead, so that every
 * command fails and the refusal is said (see `redisRefusal`), not another database's data used.
 */
function refusingMissingDatabase(redis: Redis): Redis {
  redis.on('error', (error: Error) => {
    if (/DB index is out of range/i.test(error.message)) redis.disconnect();
  });
  return redis;
}
