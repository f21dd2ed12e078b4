import { createClient, keysFor } from '@arcflow/queue';
import { type PrivateRedis, startPrivateRedis } from '@arcflow/testing';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { Registry } from '../src/registry.ts';

const servers: PrivateRedis[] = [];
afterAll(async () => {
  for (const server of servers) await server.close();
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
    const server = await startPrivateRedis();
    servers.push(server);
    const url = server.url;
    const admin = new Redis(url);
    admin.on('error', () => undefined);
    await new Registry(admin, keysFor('faults'), 20_000).announce('w1', new Map([['a', { provider_queue: 'provider-x', tools: [], provider_attempts: 1 }]]));
    const client = createClient({ redis: url, prefix: 'faults', redis_timeout_ms: 8_000 });
    const first = await client.enqueue({ agent: 'a', input: 'before' });
    await server.kill();
    const during = client.enqueue({ agent: 'a', input: 'during' });
    await new Promise((resolve) => setTimeout(resolve, 700));
    await server.start();
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
