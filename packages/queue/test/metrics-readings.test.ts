import { startPrivateRedis, testCluster, testPrefix } from '@arcflow/testing';
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { hashTag } from '../src/redis/keys.ts';
import { collectReadings } from '../src/metrics/queue-readings.ts';
import { partitionTag } from '../src/redis/partitions.ts';
import { connectRedis } from '../src/redis/connect.ts';

/** Jobs in each state of `name` under `tag`, and (with `serve`) one live worker on it. */
async function fill(redis: Redis, tag: string, name: string, jobs: { waiting: number; delayed: number; prioritized: number }, serve = false) {
  const queue = new Queue(name, { connection: redis, prefix: tag });
  await queue.addBulk([
    ...Array.from({ length: jobs.waiting }, (_, n) => ({ name: 'j', data: { n } })),
    ...Array.from({ length: jobs.delayed }, (_, n) => ({ name: 'j', data: { n }, opts: { delay: 600_000 } })),
    ...Array.from({ length: jobs.prioritized }, (_, n) => ({ name: 'j', data: { n }, opts: { priority: 3 } })),
  ]);
  // A worker that never takes a job (a rate limit of one per hour after the first): it is live, and the counts stay.
  const connection = serve ? redis.duplicate() : undefined;
  connection?.on('error', () => undefined);
  const worker = connection
    ? new Worker(name, async () => new Promise(() => undefined), { connection, prefix: tag, limiter: { max: 1, duration: 3_600_000 }, concurrency: 1 })
    : undefined;
  await worker?.waitUntilReady();
  return {
    close: async () => {
      await Promise.all([queue.close(), worker?.close(true)]);
      connection?.disconnect();
    },
  };
}

describe('collectReadings: queue depth and live workers in one round trip', () => {
  it('on one Redis: one script and CLIENT LIST, summed over partitions, the busiest partition for workers', async () => {
    const server = await startPrivateRedis();
    const redis = connectRedis(server.url, { maxRetriesPerRequest: null });
    const prefix = testPrefix('readings');
    const tags = [hashTag(prefix), partitionTag(prefix, 0), partitionTag(prefix, 1)];
    const opened = [
      await fill(redis, tags[0]!, 'agent-a', { waiting: 2, delayed: 1, prioritized: 1 }),
      await fill(redis, tags[1]!, 'agent-a', { waiting: 1, delayed: 0, prioritized: 0 }),
      await fill(redis, tags[2]!, 'tool-t', { waiting: 0, delayed: 2, prioritized: 0 }, true),
    ];
    try {
      const before = await sentCommands(redis);
      const { queues: readings } = await collectReadings(redis, { names: ['agent-a', 'tool-t', 'tool-idle'], tags });
      expect((await sentCommands(redis)) - before).toBe(2);
      // One job of tool-t may be active (taken by its worker before the limit held).
      const tool = readings.find((reading) => reading.queue === 'tool-t')!;
      expect(readings.filter((reading) => reading.queue !== 'tool-t')).toEqual([
        { queue: 'agent-a', waiting: 4, active: 0, delayed: 1, workers: 0 },
        { queue: 'tool-idle', waiting: 0, active: 0, delayed: 0, workers: 0 },
      ]);
      expect(tool).toMatchObject({ delayed: 2, workers: 1 });
    } finally {
      for (const queue of opened) await queue.close();
      redis.disconnect();
      await server.close();
    }
  }, 30_000);

  it('on a Redis Cluster: each partition read in its own slot, side by side', async () => {
    const cluster = await testCluster(3);
    const redis = connectRedis(cluster.url, { maxRetriesPerRequest: null });
    redis.on('error', () => undefined); // the nodes going away at the end
    const prefix = testPrefix('readings-cluster');
    const tags = [hashTag(prefix), partitionTag(prefix, 0), partitionTag(prefix, 1), partitionTag(prefix, 2)];
    const opened = [];
    try {
      for (const [index, tag] of tags.entries()) opened.push(await fill(redis, tag, 'agent-c', { waiting: index, delayed: 1, prioritized: 0 }));
      const [reading] = (await collectReadings(redis, { names: ['agent-c'], tags }, { runs: true })).queues;
      expect(reading).toEqual({ queue: 'agent-c', waiting: 0 + 1 + 2 + 3, active: 0, delayed: 4, workers: 0 });
    } finally {
      for (const queue of opened) await queue.close();
      redis.disconnect();
      await cluster.close();
    }
  }, 60_000);
});

/** The commands a client sent this Redis: scripts and CLIENT LIST (a script's own calls are not sent). */
async function sentCommands(redis: Redis): Promise<number> {
  const stats = await redis.info('commandstats');
  return [...stats.matchAll(/cmdstat_(evalsha|eval|client\|list|script\|load):calls=(\d+)/g)].reduce((sum, match) => sum + Number(match[2]), 0);
}
