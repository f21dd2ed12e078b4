import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

/** A redis-server of a test's own, to kill and restart without touching the shared one. */
export interface PrivateRedis {
  readonly url: string;
  readonly port: number;
  /** SIGKILLs the server (with `durable`, nothing acknowledged is lost) and waits for its exit. */
  kill(): Promise<void>;
  /** Starts it again on the same port and directory, and waits until it answers. */
  start(): Promise<void>;
  /** Kills it for good and removes its directory. */
  close(): Promise<void>;
}

/**
 * Starts `redis-server` (from the machine's packages) on a free loopback port. `durable` turns
 * on the append-only file with a sync per write, so a `kill -9` loses nothing that was
 * acknowledged, as a production Redis with AOF `always` would.
 */
export async function startPrivateRedis(options: { durable?: boolean } = {}): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'arcflow-redis-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', ''];
  args.push(...(options.durable ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no']));
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn('redis-server', args, { stdio: 'ignore' });
    await answers(port);
  };
  const kill = async () => {
    const running = child;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    kill,
    start,
    async close() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export async function answers(port: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const redis = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      await redis.ping();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer: ${(error as Error).message}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      redis.disconnect();
    }
  }
}
