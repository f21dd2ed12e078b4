import { RunStore, keysFor } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RunThreads } from '../src/tokens.ts';

const prefix = testPrefix('run-threads');
const redis = new Redis(TEST_REDIS_URL);
const store = new RunStore(redis, prefix, 60);
const recordKey = (run_id: string) => keysFor(prefix).record(run_id);

afterAll(async () => {
  await cleanupPrefix(prefix);
  await redis.quit();
});

/** A run record on `thread_id` (or on none), as an enqueue writes it. */
async function createRun(run_id: string, thread_id?: string): Promise<void> {
  await store.createRun({ run_id, agent: 'a', input: 'hi', config: null, exec_config: null, trace: {}, definition_hash: '' }, undefined, {
    kind: 'RunEnqueued',
    step_id: 's1',
    agent: 'a',
  });
  if (thread_id) await redis.hset(recordKey(run_id), 'thread_id', thread_id);
}

describe("the run-to-thread lookup of a token's checks", () => {
  it("reads a run's thread once and keeps it (a run never changes thread); a run not found, or on no thread, is read again", async () => {
    const threads = new RunThreads(store, 2);
    await createRun('run_rt-a', 'thread-a');
    await createRun('run_rt-loose');
    expect(await redis.hget(recordKey('run_rt-a'), 'thread_id')).toBe('thread-a');
    expect(await threads.of('run_rt-a')).toBe('thread-a');
    expect(await threads.of('run_rt-loose')).toBeUndefined();
    expect(await threads.of('run_rt-later')).toBeUndefined();
    // Kept: the record is not read again (its field changed under it is not seen).
    await redis.hset(recordKey('run_rt-a'), 'thread_id', 'elsewhere');
    expect(await threads.of('run_rt-a')).toBe('thread-a');
    // Not kept: an id that becomes a run on a thread is found.
    await createRun('run_rt-later', 'thread-b');
    expect(await threads.of('run_rt-later')).toBe('thread-b');
    // Bounded: a third run pushes out the oldest, which is read again.
    await createRun('run_rt-c', 'thread-c');
    expect(await threads.of('run_rt-c')).toBe('thread-c');
    expect(await threads.of('run_rt-a')).toBe('elsewhere');
  });
});
