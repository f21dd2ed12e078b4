import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { ConfigError } from '@arcflow/core';
import { connectRedis, redactUrl } from '@arcflow/queue';

/** How long the demo waits for a PING answer (a cluster's first answer needs its slot map). */
const PING_TIMEOUT_MS = 2_000;

export interface DemoRedis {
  readonly url: string;
  /** How the Redis was found, for the demo's header. */
  readonly origin: string;
  /** True when the demo started this Redis (it is gone after the demo). */
  readonly private: boolean;
  stop(): Promise<void>;
}

/** Whether a Redis (one server, or a cluster when `url` lists several nodes) answers PING within two seconds. */
export async function redisAnswers(url: string): Promise<boolean> {
  const redis = connectRedis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1_000 });
  redis.on('error', () => undefined);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), PING_TIMEOUT_MS);
  });
  try {
    const pinged = (async () => {
      await redis.connect();
      return (await redis.ping()) === 'PONG';
    })().catch(() => false);
    return await Promise.race([pinged, timeout]);
  } finally {
    clearTimeout(timer);
    redis.disconnect();
  }
}

/**
 * The Redis for the demo: `REDIS_URL`, else one on 127.0.0.1:6379, else a private
 * `redis-server` on a free port (stopped at the end), else a clear error saying how to start one.
 */
export async function ensureRedis(envUrl: string | undefined): Promise<DemoRedis> {
  const none = async () => undefined;
  if (envUrl) {
    if (await redisAnswers(envUrl)) return { url: envUrl, origin: 'REDIS_URL', private: false, stop: none };
    throw new ConfigError(`no Redis answers at REDIS_URL=${redactUrl(envUrl)}`);
  }
  const local = 'redis://127.0.0.1:6379';
  if (await redisAnswers(local)) return { url: local, origin: 'local Redis on 127.0.0.1:6379', private: false, stop: none };
  if (!hasCommand('redis-server')) {
    throw new ConfigError(
      'no Redis found on 127.0.0.1:6379 and redis-server is not installed.\n' + 'Start one with `docker compose up -d redis` (or install redis-server), or set REDIS_URL.',
    );
  }
  const port = await freePort();
  const child: ChildProcess = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const url = `redis://127.0.0.1:${port}`;
  for (let tries = 0; tries < 50 && !(await redisAnswers(url)); tries += 1) await new Promise((resolve) => setTimeout(resolve, 100));
  if (!(await redisAnswers(url))) throw new ConfigError('started redis-server, but it did not answer');
  return {
    url,
    origin: `private redis-server on port ${port}`,
    private: true,
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    },
  };
}

function hasCommand(name: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
