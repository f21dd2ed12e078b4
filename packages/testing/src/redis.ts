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
  let deleted = 0;
  try {
    for (const pattern of [`{${prefix}}*`, `{${prefix}~p*`]) {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) deleted += await redis.del(...keys);
      } while (cursor !== '0');
    }
  } finally {
    await redis.quit();
  }
  return deleted;
}
