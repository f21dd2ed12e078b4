import { ConfigError, tokenSecrets } from '@arcflow/core';

export type Scope = 'read' | 'write' | 'admin';

/** An API key as `ARCFLOW_API_KEYS` lists it: `name:secret:scope`. */
export interface ApiKey {
  readonly name: string;
  readonly secret: string;
  readonly scope: Scope;
}

export interface ServerOptions {
  readonly redis?: string;
  readonly prefix?: string;
  readonly host?: string;
  readonly port?: number;
  /** No keys: loopback only, and every request is treated as `admin`. */
  readonly keys?: readonly ApiKey[];
  /** Requests per second per key (per address without keys). Default 100. */
  readonly rate_per_second?: number;
  /** Origins allowed to call the API from a browser; none (the default) sends no CORS headers. */
  readonly cors_origins?: readonly string[];
  /** A trace viewer's URL with `{trace_id}`, for the console's trace links. */
  readonly trace_url?: string;
  /** How often an idle event stream gets a comment line (default 10 000 ms). */
  readonly heartbeat_ms?: number;
  /** Where requests are logged (default: JSON lines on stdout). */
  readonly log?: boolean;
  /**
   * `ARCFLOW_TOKEN_SECRET`: signs and checks end users' tokens (SPEC §19); two secrets separated
   * by a comma rotate (the first signs, either checks). Unset: no token is minted or accepted.
   */
  readonly token_secret?: string;
}

export const SERVER_DEFAULTS = Object.freeze({ host: '127.0.0.1', port: 8080, rate_per_second: 100, heartbeat_ms: 10_000 });

const SCOPES: readonly Scope[] = ['read', 'write', 'admin'];

/** Parses `ARCFLOW_API_KEYS` (`name:secret:scope`, comma-separated); throws a ConfigError naming the entry that is wrong (never its secret). */
export function parseApiKeys(value: string | undefined): ApiKey[] {
  if (value === undefined || value.trim() === '') return [];
  const keys = value.split(',').map((entry, index) => {
    const parts = entry.trim().split(':');
    const [name, secret, scope] = parts;
    if (parts.length !== 3 || !name || !secret || !SCOPES.includes(scope as Scope)) {
      // An entry of another number of fields may begin with its secret: only one of three is named.
      const named = parts.length === 3 && name ? ` ('${name}')` : ` (${parts.length} field${parts.length === 1 ? '' : 's'})`;
      throw new ConfigError(`ARCFLOW_API_KEYS entry ${index + 1}${named} must be name:secret:scope, scope one of ${SCOPES.join(', ')}`);
    }
    if (secret.length < 16) throw new ConfigError(`ARCFLOW_API_KEYS entry ${index + 1} ('${name}'): the secret must be at least 16 characters`);
    return { name, secret, scope: scope as Scope };
  });
  const names = new Set<string>();
  for (const key of keys) {
    if (names.has(key.name)) throw new ConfigError(`ARCFLOW_API_KEYS names '${key.name}' twice`);
    names.add(key.name);
  }
  return keys;
}

/**
 * Reads `serve`'s settings from the environment: REDIS_URL, ARCFLOW_PREFIX, ARCFLOW_API_KEYS,
 * ARCFLOW_API_RATE, ARCFLOW_CORS_ORIGINS, ARCFLOW_TRACE_URL, ARCFLOW_SSE_HEARTBEAT_MS (how
 * often an idle event stream gets a comment line; default 10 000) and ARCFLOW_TOKEN_SECRET.
 */
export function serverOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): Omit<ServerOptions, 'host' | 'port'> {
  const rate = env.ARCFLOW_API_RATE === undefined || env.ARCFLOW_API_RATE === '' ? undefined : Number(env.ARCFLOW_API_RATE);
  if (rate !== undefined && (!Number.isInteger(rate) || rate < 1)) throw new ConfigError(`ARCFLOW_API_RATE must be an integer >= 1, got ${env.ARCFLOW_API_RATE}`);
  const heartbeat = env.ARCFLOW_SSE_HEARTBEAT_MS ? Number(env.ARCFLOW_SSE_HEARTBEAT_MS) : undefined;
  if (heartbeat !== undefined && (!Number.isInteger(heartbeat) || heartbeat < 100 || heartbeat > 15_000)) {
    throw new ConfigError(`ARCFLOW_SSE_HEARTBEAT_MS must be an integer from 100 to 15000, got ${env.ARCFLOW_SSE_HEARTBEAT_MS}`);
  }
  const origins = (env.ARCFLOW_CORS_ORIGINS ?? '')
    .split(',')
    .map((origin) => origin.trim())
    .filter((origin) => origin !== '');
  for (const origin of origins) {
    if (!/^https?:\/\/[^/]+$/.test(origin)) throw new ConfigError(`ARCFLOW_CORS_ORIGINS: '${origin}' is not an origin (scheme://host[:port])`);
  }
  // Checked here, so that `serve` refuses a short secret at start rather than at the first token.
  const token_secret = env.ARCFLOW_TOKEN_SECRET === undefined || env.ARCFLOW_TOKEN_SECRET.trim() === '' ? undefined : env.ARCFLOW_TOKEN_SECRET;
  if (token_secret !== undefined) tokenSecrets(token_secret);
  return {
    ...(env.REDIS_URL ? { redis: env.REDIS_URL } : {}),
    ...(env.ARCFLOW_PREFIX ? { prefix: env.ARCFLOW_PREFIX } : {}),
    keys: parseApiKeys(env.ARCFLOW_API_KEYS),
    ...(rate !== undefined ? { rate_per_second: rate } : {}),
    cors_origins: origins,
    ...(env.ARCFLOW_TRACE_URL ? { trace_url: env.ARCFLOW_TRACE_URL } : {}),
    ...(heartbeat !== undefined ? { heartbeat_ms: heartbeat } : {}),
    ...(token_secret !== undefined ? { token_secret } : {}),
  };
}

/** Whether `host` only accepts connections from this machine. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
