import { ConfigError, RequestError, type ToolLogger } from '@arcflow/core';
import type { Redis } from 'ioredis';
import { untrustedCertificate } from './tls-trust.ts';

/** A Redis URL (or a cluster's list of them) fit for messages and logs: any password is replaced by `***`. */
export function redactUrl(url: string): string {
  if (url.includes(','))
    return url
      .split(',')
      .map((part) => redactOne(part.trim()))
      .join(',');
  return redactOne(url);
}

function redactOne(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString().replace(/\/$/, '');
  } catch {
    return url.replace(/\/\/([^@/]*)@/, '//***@');
  }
}

/** Errors that mean Redis cannot be reached right now, as ioredis and Node report them. */
export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH)$/.test(code)) return true;
  return (
    error.name === 'MaxRetriesPerRequestError' ||
    /Stream isn't writeable|Connection is closed|Connection in subscriber mode|connect ETIMEDOUT|Command timed out/.test(error.message)
  );
}

/**
 * The error for an answer from Redis that no retry will change, said at once in one line: a
 * single URL naming one node of a Redis Cluster (it answered `MOVED` or `ASK`; cluster mode takes
 * several nodes, comma-separated), or credentials or permissions Redis refused (`WRONGPASS`,
 * `NOAUTH`, `NOPERM`), or a TLS certificate this process does not trust (saying how to trust
 * it). Undefined for any other error. `error` may be the error's text or code.
 */
export function redisRefusal(error: unknown, url: string): ConfigError | undefined {
  const message = error instanceof Error ? error.message : typeof error === 'string' ? error : '';
  const where = `the Redis at ${redactUrl(url)}`;
  const code = (error as { code?: unknown } | undefined)?.code;
  const untrusted = untrustedCertificate(typeof code === 'string' ? code : message, where);
  if (untrusted) return untrusted;
  if (/^(MOVED|ASK) \d+ /.test(message)) {
    return new ConfigError(
      `${where} is one node of a Redis Cluster (it answered ${message}); for cluster mode, list several of its nodes, comma-separated: redis://host1:6379,redis://host2:6379`,
    );
  }
  if (/DB index is out of range/i.test(message)) {
    return new ConfigError(
      `${where} has no such database (${firstLine(message)}): the number after the port in REDIS_URL must be below the server's 'databases' setting (16 by default)`,
    );
  }
  if (/^(WRONGPASS|NOAUTH)\b/.test(message)) {
    return new ConfigError(`${where} refused the login (${firstLine(message)}): check the user and password in REDIS_URL (redis://user:password@host:6379)`);
  }
  if (/^NOPERM\b/.test(message)) {
    return new ConfigError(`${where} refused a command to this user (${firstLine(message)}): the user needs arcflow's commands, channels and keys (docs/deploy.md, "Redis")`);
  }
  return undefined;
}

function firstLine(text: string): string {
  return text.split('\n')[0]!.slice(0, 200);
}

/** What {@link watchConnection} knows of a connection. */
export interface ConnectionHealth {
  /** The last error, as said to people: its code and address, a Redis error reply's code, or what it means (see {@link connectionFailure}). */
  reason(): string | undefined;
  /** The last error itself (its code and message), for telling a refusal (a login, a command, a certificate) from an outage; never shown as it is. */
  lastError(): Error | undefined;
  /**
   * Set while a connection that has never been ready is refused, or its host is not found:
   * `ECONNREFUSED at 127.0.0.1:6380`. Nothing answers there, so waiting would only delay the error.
   */
  unreachable(): string | undefined;
}

/** Codes that say nothing answers at the address (as opposed to a connection that broke or timed out). */
const NOTHING_THERE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'ENOENT']);

/**
 * Watches a connection and says that Redis is away, and when it is back: `waiting for Redis at
 * redis://host:6379 (ECONNREFUSED at host:6379)`, then, with `repeatMs`, again every `repeatMs`
 * while it stays away, so a worker started with a wrong URL keeps saying so. Also the `error`
 * listener every connection needs (without one, Node prints each retry's error).
 */
export function watchConnection(redis: Redis, url: string, logger: ToolLogger, repeatMs?: number): ConnectionHealth {
  let down: number | undefined;
  let everReady = false;
  let reason: string | undefined;
  let lastError: Error | undefined;
  let code: string | undefined;
  let repeat: NodeJS.Timeout | undefined;
  const where = redactUrl(url);
  const stopRepeating = () => {
    clearInterval(repeat);
    repeat = undefined;
  };
  redis.on('error', (error: Error & { code?: string; address?: string; port?: number }) => {
    code = error.code;
    // A refusal stays the reason until a connection is made: the errors that follow it (a cluster
    // client's `Failed to refresh slots cache`, a closed stream) say less.
    if (!lastError || !refusal(lastError) || refusal(error)) lastError = error;
    // Once something that is not Redis has answered, the closed connections after it say no more.
    const said = connectionFailure(error);
    if (said === NOT_REDIS || reason !== NOT_REDIS) reason = said;
    if (down !== undefined) return;
    down = Date.now();
    logger.warn(`waiting for Redis at ${where} (${reason})`, { redis: where, reason });
    if (repeatMs === undefined) return;
    repeat = setInterval(() => {
      const awaySeconds = Math.round((Date.now() - down!) / 1000);
      logger.warn(`still cannot reach Redis at ${where} (${reason}) after ${awaySeconds} s; retrying`, { redis: where, reason, away_seconds: awaySeconds });
    }, repeatMs);
    repeat.unref();
  });
  redis.on('ready', () => {
    everReady = true;
    reason = undefined;
    lastError = undefined;
    stopRepeating();
    if (down === undefined) return;
    down = undefined;
    logger.info(`connected to Redis at ${where}`, { redis: where });
  });
  redis.on('end', stopRepeating);
  return { reason: () => reason, lastError: () => lastError, unreachable: () => (!everReady && code !== undefined && NOTHING_THERE.has(code) ? reason : undefined) };
}

const NOT_REDIS = 'something that is not Redis answered';

const refusal = (error: Error) => redisRefusal(error, '') !== undefined;

/**
 * A connection's error as said to people (SPEC §5: never a driver's internal message): its system
 * code and address (`ECONNREFUSED at 127.0.0.1:6380`); a Redis error reply's own code (`LOADING`);
 * else what it means — something that is not Redis answered, the connection timed out, or it is
 * closed.
 */
export function connectionFailure(error: unknown): string {
  const { code, address, port, message = '' } = (error ?? {}) as { code?: unknown; address?: string; port?: number; message?: string };
  if (typeof code === 'string' && code !== '') return `${code}${address ? ` at ${address}${port ? `:${port}` : ''}` : ''}`;
  const reply = /^([A-Z][A-Z_]{2,30})\b/.exec(message);
  if (reply && !/^ERR$/.test(reply[1]!)) return reply[1]!;
  if (/Protocol error/i.test(message)) return NOT_REDIS;
  if (/ETIMEDOUT|timed out/i.test(message)) return 'no answer in time';
  return 'no connection';
}

/**
 * Runs a client operation against a connection that does not queue commands while it is away
 * (`enableOfflineQueue: false`, no resends): while Redis cannot be reached the operation is tried
 * again until `timeoutMs` has passed, then fails with a `redis_unavailable` error naming the URL;
 * at once when nothing has ever answered at the address (see {@link ConnectionHealth.unreachable}).
 * An operation that failed this way left nothing queued to run later, so trying it again is safe.
 */
export async function withRedis<T>(redis: Redis, url: string, timeoutMs: number, health: ConnectionHealth, operation: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (!isReady(redis)) {
        await readyBefore(redis, deadline);
        if (!isReady(redis)) throw new NotReady('not connected');
      }
      return await operation();
    } catch (error) {
      if (!isConnectionError(error) && !(error instanceof NotReady)) throw redisRefusal(error, url) ?? error;
      // Refused credentials surface as the connection's last error, and waiting will not change them.
      const refused = redisRefusal(health.lastError(), url);
      if (refused) throw refused;
      // Nothing listens at the address of a connection never made: a wrong URL, or Redis not started.
      const unreachable = health.unreachable();
      if (unreachable) throw new RequestError('redis_unavailable', `cannot reach Redis at ${redactUrl(url)} (${unreachable})`);
      if (Date.now() >= deadline) {
        throw new RequestError('redis_unavailable', `cannot reach Redis at ${redactUrl(url)} (${health.reason() ?? connectionFailure(error)}) after ${timeoutMs} ms`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

class NotReady extends Error {}

const isReady = (redis: Pick<Redis, 'status'>) => redis.status === 'ready';

/** One wait per connection for its next `ready` or `error`, shared by every call waiting on it. */
const readiness = new WeakMap<Redis, Promise<void>>();

/** Waits for the connection to be ready, or for its next error (which the caller looks at), until `deadline`. */
function readyBefore(redis: Redis, deadline: number): Promise<void> {
  let ready = readiness.get(redis);
  if (!ready) {
    ready = new Promise<void>((resolve) => {
      const settle = () => {
        redis.off('ready', settle);
        redis.off('error', settle);
        resolve();
      };
      redis.on('ready', settle);
      redis.on('error', settle);
    }).finally(() => readiness.delete(redis));
    readiness.set(redis, ready);
  }
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new NotReady('not connected')), Math.max(0, deadline - Date.now()));
  });
  return Promise.race([ready, late]).finally(() => clearTimeout(timer));
}

/**
 * Closes a connection without waiting on Redis: `QUIT` when it is connected (what was sent is
 * answered first), else a plain disconnect, which also stops reconnecting. A `QUIT` queued on a
 * connection that is not up would wait for Redis to come back.
 */
export async function closeRedis(redis: Pick<Redis, 'status' | 'quit' | 'disconnect'>): Promise<void> {
  if (isReady(redis)) {
    try {
      await redis.quit();
      return;
    } catch {
      // Lost while quitting: disconnect below.
    }
  }
  redis.disconnect();
}

/**
 * Watches a connection for an outage: `away` resolves once it has been without Redis for `ms` in a
 * row (checked every 100 ms); `stop` ends the watch.
 */
export function outageOf(redis: Pick<Redis, 'status'>, ms: number): { away: Promise<void>; stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let since: number | undefined;
  const away = new Promise<void>((resolve) => {
    timer = setInterval(() => {
      if (isReady(redis)) {
        since = undefined;
        return;
      }
      since ??= Date.now();
      if (Date.now() - since >= ms) resolve();
    }, 100);
  });
  return { away, stop: () => clearInterval(timer) };
}
