import { silentLogger } from '@arcflow/core';
import { TEST_REDIS_URL, cleanupPrefix, startPrivateRedis, testPrefix } from '@arcflow/testing';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { DeadWorkers, RECONNECT_GRACE_MS, liveOwners } from '../src/watchdog/dead-workers.ts';
import { until } from './harness.ts';

// The release of a dead worker's locks, on one BullMQ queue with jobs taken under chosen tokens
// (`<owner>/<n>:<m>`): only owners with no connection open lose them, and none while this
// process's own connections are down.

const prefixes: string[] = [];
afterAll(async () => {
  for (const prefix of prefixes) await cleanupPrefix(prefix);
});

async function setup(name: string, url = TEST_REDIS_URL) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const queue = new Queue('q', { connection, prefix: `{${prefix}}` });
  // Named as a worker's are: its blocking connection says `…:w:me`. It takes jobs only when told to.
  const worker = new Worker('q', null, { connection, prefix: `{${prefix}}`, name: 'me', autorun: false, lockDuration: 60_000 });
  await worker.waitUntilReady();
  const take = async (token: string) => {
    await queue.add('job', {});
    return (await worker.getNextJob(token))!;
  };
  const dead = new DeadWorkers({ redis: connection, owner: 'me', workers: () => [worker], logger: silentLogger, interval_ms: 50 });
  const close = async () => {
    await dead.close();
    await worker.close();
    await queue.close();
    connection.disconnect();
  };
  return { prefix, connection, queue, take, dead, close };
}

describe("a dead worker's locks", () => {
  it('reads the live owners from CLIENT LIST replies', () => {
    const list = 'id=1 addr=a name={p}:cQ==:w:worker_ab12 age=1\nid=2 addr=b name= age=1\nid=3 addr=c name=arcflow:metrics age=1\n';
    expect([...liveOwners([list, 'id=4 name={p~p1~2}:cQ==:w:worker_cd34 age=2\n'])]).toEqual(['worker_ab12', 'worker_cd34']);
  });

  it('puts back in wait the jobs of owners with no connection, and only those', async () => {
    const { take, dead, queue, close } = await setup('dead-locks');
    try {
      const ghost = await take('ghost/0:1');
      const mine = await take('me/0:2');
      dead.start();
      await until(async () => (await queue.getJobState(ghost.id!)) === 'waiting', 5_000);
      expect(await queue.getJobState(mine.id!)).toBe('active');
      expect((await queue.getJob(ghost.id!))!.stalledCounter).toBe(1);
    } finally {
      await close();
    }
  });

  it('takes no one for dead while its own connections come back', async () => {
    const { connection, take, dead, queue, close } = await setup('dead-locks-reconnect');
    try {
      // Past its start: the start's release has come and gone (it puts back an owner dead before it), however slowly it came.
      const before = await take('before/0:1');
      dead.start();
      await until(async () => (await queue.getJobState(before.id!)) === 'waiting', 5_000);
      const ghost = await take('ghost/0:1');
      // Every connection of this process is cut: it reconnects, and so would the others.
      const admin = new Redis(TEST_REDIS_URL);
      const ids = ((await admin.client('LIST')) as string).split('\n').flatMap((line) => (/ name=\S*:w:me /.test(line) ? [/^id=(\d+)/.exec(line)![1]!] : []));
      await Promise.all(ids.map((id) => admin.client('KILL', 'ID', id)));
      await admin.quit();
      const cutAt = Date.now();
      await until(async () => connection.status === 'ready', 5_000);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(await queue.getJobState(ghost.id!)).toBe('active');
      await until(async () => (await queue.getJobState(ghost.id!)) === 'waiting', RECONNECT_GRACE_MS + 5_000);
      expect(Date.now() - cutAt).toBeGreaterThanOrEqual(RECONNECT_GRACE_MS - 500);
    } finally {
      await close();
    }
  }, 20_000);

  it('takes no one for dead while Redis has just started, even when it starts then: the others are reconnecting', async () => {
    const redis = await startPrivateRedis({ durable: true });
    // A live worker that reconnects slowly (a busy process): its connection is named as a worker's, and comes back 2.5 s after Redis.
    let ghostConnection: Redis | undefined;
    try {
      const { prefix, queue, take, dead, close } = await setup('dead-locks-restart', redis.url);
      try {
        ghostConnection = new Redis(redis.url, { connectionName: `{${prefix}}:cQ==:w:ghost`, retryStrategy: () => 2_500 });
        ghostConnection.on('error', () => undefined);
        await until(async () => ghostConnection!.status === 'ready', 5_000);
        const ghost = await take('ghost/0:1');
        const gone = await take('gone/0:2');
        await redis.kill();
        await redis.start();
        const startedAt = Date.now();
        // This process's connections are back first; then its detector starts, as a new worker's does.
        await until(async () => (await queue.getJobState(ghost.id!)) === 'active', 5_000);
        dead.start();
        await until(async () => (await queue.getJobState(gone.id!)) === 'waiting', RECONNECT_GRACE_MS + 5_000);
        // The owner with no connection at all loses its job once the grace is over; the slow one, back by then, keeps its own.
        expect(Date.now() - startedAt).toBeGreaterThanOrEqual(RECONNECT_GRACE_MS - 1_000);
        expect(ghostConnection.status).toBe('ready');
        expect(await queue.getJobState(ghost.id!)).toBe('active');
      } finally {
        ghostConnection?.disconnect();
        await close();
      }
    } finally {
      await redis.close();
    }
  }, 30_000);
});
