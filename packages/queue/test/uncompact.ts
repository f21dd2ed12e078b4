import { keysFor } from '@arcflow/queue';
import type { Redis } from 'ioredis';
import { decodeArchive } from '../src/records/archive.ts';
import { until } from './harness.ts';

/**
 * Writes a compacted run's keys back the way the version before compaction kept them (and drops
 * its archive): for tests that read a finished run's raw keys, and for runs "written by the
 * previous version".
 */
export async function writeTheOldWay(redis: Redis, record: string): Promise<void> {
  const archive = decodeArchive((await redis.getBuffer(`${record}:archive`))!);
  const keys = (archive as unknown as { keys: Record<string, { t: string; v: unknown }> }).keys;
  const index = `${record}:keys`;
  const ttl = await redis.ttl(record);
  for (const [suffix, { t, v }] of Object.entries(keys)) {
    const key = record + suffix;
    if (t === 'string') await redis.set(key, v as string);
    if (t === 'list') await redis.rpush(key, ...(v as string[]));
    if (t === 'hash') await redis.hset(key, ...(v as string[]));
    if (t === 'stream') for (const [id, fields] of v as [string, string[]][]) await redis.xadd(key, id, ...fields);
    await redis.expire(key, ttl);
    await redis.sadd(index, key);
  }
  await redis.sadd(index, record, index);
  await redis.expire(index, ttl);
  await redis.hdel(record, 'archived');
  await redis.del(`${record}:archive`);
}

/** Waits for an ended run's compaction, then writes its keys back as they were while it ran. */
export async function uncompacted(redis: Redis, prefix: string, run_id: string): Promise<void> {
  const record = keysFor(prefix).run(run_id).record;
  await until(async () => (await redis.hget(record, 'archived')) !== null);
  await writeTheOldWay(redis, record);
}
