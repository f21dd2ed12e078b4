import { Agent, silentLogger } from '@arcflow/core';
import { createClient, keysFor, startWorker } from '@arcflow/queue';
import { type PrivateRedis, scriptedProvider, startPrivateRedis } from '@arcflow/testing';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { Registry } from '../src/records/registry.ts';

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
    expect(failure.message).toMatch(/^cannot reach Redis at redis:\/\/app:\*\*\*@127\.0\.0\.1:1 \(ECONNREFUSED at 127\.0\.0\.1:1\)/);
    expect(failure.message).not.toContain('s3cret');
    await expect(client.get('run_abc')).rejects.toMatchObject({ code: 'redis_unavailable' });
    // Every other call too, `wait` (whose subscription would wait for Redis) included.
    const calls: [string, () => Promise<unknown>][] = [
      ['wait', () => client.wait('run_abc', { timeout_ms: 60_000 })],
      [
        'events',
        async () => {
          for await (const _event of client.events('run_abc', { follow: true }));
        },
      ],
      ['cancel', () => client.cancel('run_abc')],
      ['approve', () => client.approve('run_abc', 'c1', { approved: true })],
      ['list', () => client.list()],
      ['agents', () => client.agents()],
      ['queues', () => client.queues()],
    ];
    const outcomes = await Promise.all(
      calls.map(async ([name, call]) => {
        const began = Date.now();
        const error = await call().then(
          () => undefined,
          (thrown: unknown) => thrown,
        );
        return { name, code: (error as { code?: string } | undefined)?.code, ms: Date.now() - began };
      }),
    );
    for (const outcome of outcomes) expect(outcome).toMatchObject({ code: 'redis_unavailable', ms: expect.any(Number) });
    expect(Math.max(...outcomes.map(({ ms }) => ms))).toBeLessThan(5_000);
    // Closing does not wait for Redis either (its subscriber's QUIT would).
    const closing = Date.now();
    await client.close();
    expect(Date.now() - closing).toBeLessThan(1_000);
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

  it('stops a worker whose drain cannot finish because Redis stays away, saying so, within its outage allowance', async () => {
    const server = await startPrivateRedis();
    servers.push(server);
    const worker = await startWorker({ agents: [new Agent({ name: 'idle' })], provider: scriptedProvider([]), redis: server.url, prefix: 'faults-drain', logger: silentLogger });
    await server.kill();
    const closing = Date.now();
    await expect(worker.close()).rejects.toThrow(
      `Redis at ${server.url} has been unreachable for 10 s: stopped without draining; the jobs in flight go to other workers once their locks expire`,
    );
    expect(Date.now() - closing).toBeLessThan(13_000);
  });

  it('says at once, in one line, that Redis refused the login or a command, for the client and a worker', async () => {
    const server = await startPrivateRedis();
    servers.push(server);
    const admin = new Redis(server.url);
    await admin.call('ACL', 'SETUSER', 'narrow', 'on', '>narrow-pw', '~*', '+ping', '+info');
    await admin.config('SET', 'requirepass', 'right-pw');
    admin.disconnect();
    const wrong = server.url.replace('redis://', 'redis://:wrong-pw@');
    const login = `the Redis at ${server.url.replace('redis://', 'redis://:***@')} refused the login (WRONGPASS`;
    const client = createClient({ redis: wrong, prefix: 'faults-auth' });
    const began = Date.now();
    await expect(client.list()).rejects.toMatchObject({ name: 'ConfigError', message: expect.stringContaining(login) });
    expect(Date.now() - began).toBeLessThan(3_000);
    await client.close();
    await expect(
      startWorker({ agents: [new Agent({ name: 'idle' })], provider: scriptedProvider([]), redis: wrong, prefix: 'faults-auth', logger: silentLogger }),
    ).rejects.toMatchObject({
      name: 'ConfigError',
      message: expect.stringContaining(login),
    });
    const narrow = createClient({ redis: server.url.replace('redis://', 'redis://narrow:narrow-pw@'), prefix: 'faults-auth' });
    await expect(narrow.list()).rejects.toMatchObject({ name: 'ConfigError', message: expect.stringContaining('refused a command to this user (NOPERM') });
    await narrow.close();
  });

  it('refuses a database the Redis does not have, naming it, instead of using database 0', async () => {
    const server = await startPrivateRedis();
    servers.push(server);
    const missing = `${server.url}/99`;
    const said = `the Redis at ${missing} has no such database (ERR DB index is out of range)`;
    const client = createClient({ redis: missing, prefix: 'faults-db' });
    await expect(client.list()).rejects.toMatchObject({ name: 'ConfigError', message: expect.stringContaining(said) });
    await client.close();
    await expect(
      startWorker({ agents: [new Agent({ name: 'idle' })], provider: scriptedProvider([]), redis: missing, prefix: 'faults-db', logger: silentLogger }),
    ).rejects.toMatchObject({ name: 'ConfigError', message: expect.stringContaining(said) });
    // Nothing was written to database 0.
    const zero = new Redis(server.url);
    expect(await zero.keys('*')).toEqual([]);
    zero.disconnect();
  });
});
