import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { createClient, keysFor } from '@arcflow/queue';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { Registry } from '../src/registry.ts';

/** A private redis-server on a free port, to stop and start without touching the shared one. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function startRedis(port: number): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  return new Promise((resolve, reject) => {
    const probe = async (tries: number): Promise<void> => {
      const redis = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      redis.on('error', () => undefined);
      try {
        await redis.connect();
        await redis.ping();
        redis.disconnect();
        resolve(child);
      } catch {
        redis.disconnect();
        if (tries <= 0) reject(new Error('redis-server did not start'));
        else setTimeout(() => void probe(tries - 1), 50);
      }
    };
    void probe(100);
  });
}

const stopped: ChildProcess[] = [];
afterAll(() => {
  for (const child of stopped) child.kill('SIGKILL');
});

describe('when Redis cannot be reached', () => {
  it('fails a client call within its timeout, naming the URL with the password hidden', async () => {
    const client = createClient({ redis: 'redis://app:s3cret@127.0.0.1:1', prefix: 'faults', redis_timeout_ms: 1_500 });
    const started = Date.now();
    const failure = (await client.enqueue({ agent: 'a', input: 'hi' }).catch((error: unknown) => error)) as Error & { code?: string };
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(failure).toMatchObject({ name: 'RequestError', code: 'redis_unavailable' });
    expect(failure.message).toMatch(/^cannot reach Redis at redis:\/\/app:\*\*\*@127\.0\.0\.1:1 \(ECONNREFUSED\)/);
    expect(failure.message).not.toContain('s3cret');
    await expect(client.get('run_abc')).rejects.toMatchObject({ code: 'redis_unavailable' });
    await client.close();
  });

  it('rides through a Redis restart shorter than its timeout, and an enqueue made during it creates one run', async () => {
    const port = await freePort();
    let server = await startRedis(port);
    stopped.push(server);
    const url = `redis://127.0.0.1:${port}`;
    const admin = new Redis(url);
    admin.on('error', () => undefined);
    await new Registry(admin, keysFor('faults'), 20_000).announce('w1', new Map([['a', { provider_queue: 'provider-x', tools: [], provider_attempts: 1 }]]));
    const client = createClient({ redis: url, prefix: 'faults', redis_timeout_ms: 8_000 });
    const first = await client.enqueue({ agent: 'a', input: 'before' });
    server.kill('SIGKILL');
    await new Promise((resolve) => server.once('exit', resolve));
    const during = client.enqueue({ agent: 'a', input: 'during' });
    await new Promise((resolve) => setTimeout(resolve, 700));
    server = await startRedis(port);
    stopped.push(server);
    const second = await during;
    expect(second.created).toBe(true);
    expect(second.run_id).not.toBe(first.run_id);
    expect(await client.get(second.run_id)).toMatchObject({ status: 'queued' });
    // A fresh server: only what was written after the restart is there, once.
    const records = (await admin.keys('{faults}:run:*')).filter((key) => /:run:[^:]+$/.test(key));
    expect(records).toEqual([`{faults}:run:${second.run_id}`]);
    await client.close();
    admin.disconnect();
  });
});
