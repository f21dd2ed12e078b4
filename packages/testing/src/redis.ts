import { Redis } from 'ioredis';

/** The Redis the tests use: `REDIS_URL`, else the local one. */
export const TEST_REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A key prefix unique to one test file and process, so test files can share one Redis. */
export function testPrefix(name: string): string {
  return `test-${name}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Deletes every key under a prefix's hash tag (`{prefix}…`) and its partitions' (`{prefix~p3~8}…`). */
export async function cleanupPrefix(prefix: string, url = TEST_REDIS_URL): Promise<number> {
  const redis = new Redis(url);
  try {
    return (await deleteMatching(redis, `{${prefix}}*`)) + (await deleteMatching(redis, `{${prefix}~p*`));
  } finally {
    await redis.quit();
  }
}

/**
 * Deletes the keys of one Redis (or one cluster node) that match `pattern`; how many. One key per
 * command, since keys of different slots cannot share a DEL on a cluster node.
 */
export async function deleteMatching(redis: Redis, pattern: string): Promise<number> {
  let deleted = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    deleted += (await Promise.all(keys.map((key) => redis.unlink(key)))).reduce((sum, one) => sum + one, 0);
  } while (cursor !== '0');
  return deleted;
}
