import type { Socket } from 'node:net';
import { type Cluster, Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { TEST_REDIS_URL, testCluster } from '@arcflow/testing';
import { connectRedis } from '../src/redis/connect.ts';
import { coalesceWrites } from '../src/redis/writes.ts';

const KEY = `{redis-writes-test-${process.pid}}:counter`;

/** Counts the socket's flushes to the kernel: one `_write` or `_writev` call each. */
function countFlushes(redis: Redis): () => number {
  const socket = redis.stream as Socket & { _write: (...args: unknown[]) => void; _writev: (...args: unknown[]) => void };
  let flushes = 0;
  for (const method of ['_write', '_writev'] as const) {
    const original = socket[method].bind(socket);
    socket[method] = (...args: unknown[]) => {
      flushes += 1;
      original(...args);
    };
  }
  return () => flushes;
}

const connections: Redis[] = [];
const open = (coalesce: boolean) => {
  const redis = new Redis(TEST_REDIS_URL);
  connections.push(redis);
  return coalesce ? coalesceWrites(redis) : redis;
};

afterEach(async () => {
  await connections[0]?.del(KEY);
  await Promise.all(connections.splice(0).map((redis) => redis.quit()));
});

describe('coalesceWrites', () => {
  it('sends one tick of commands in one flush, in order, with every reply', async () => {
    const redis = open(true);
    await redis.ping();
    const flushes = countFlushes(redis);
    const replies = await Promise.all(Array.from({ length: 50 }, () => redis.incr(KEY)));
    expect(replies).toEqual(Array.from({ length: 50 }, (_, index) => index + 1));
    expect(flushes()).toBe(1);
  });

  it('is what makes the difference: a plain connection flushes once per command', async () => {
    const redis = open(false);
    await redis.ping();
    const flushes = countFlushes(redis);
    await Promise.all(Array.from({ length: 50 }, () => redis.incr(KEY)));
    expect(flushes()).toBe(50);
  });

  it('keeps coalescing on the new socket after a reconnect', async () => {
    const redis = open(true);
    await redis.ping();
    const first = redis.stream;
    redis.disconnect(true);
    await new Promise<void>((resolve) => redis.once('ready', () => resolve()));
    expect(redis.stream).not.toBe(first);
    const flushes = countFlushes(redis);
    await Promise.all(Array.from({ length: 20 }, () => redis.incr(KEY)));
    expect(flushes()).toBe(1);
  });
});

describe('coalesceWrites on a Redis Cluster client', () => {
  it("sends one tick of commands to a node in one flush on that node's connection", async () => {
    const cluster = await testCluster(3);
    const redis = coalesceWrites(connectRedis(cluster.url, { maxRetriesPerRequest: null }));
    try {
      await redis.ping();
      await redis.incr(KEY);
      // The node's own connection in the client's pool: the one that answers for the key without MOVED.
      const masters = (redis as unknown as Cluster).nodes('master');
      const owner = (await Promise.all(masters.map(async (each) => ((await each.exists(KEY).catch(() => 0)) === 1 ? each : undefined)))).find(Boolean)!;
      const flushes = countFlushes(owner);
      const replies = await Promise.all(Array.from({ length: 50 }, () => redis.incr(KEY)));
      expect(replies).toEqual(Array.from({ length: 50 }, (_, index) => index + 2));
      expect(flushes()).toBe(1);
    } finally {
      await redis.del(KEY);
      redis.disconnect();
      await cluster.close();
    }
  }, 60_000);
});
