import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { RunStore } from '../src/store/run-store.ts';

const prefix = testPrefix('store-scripts');
const redis = new Redis(TEST_REDIS_URL);

afterAll(async () => {
  await cleanupPrefix(prefix);
  await redis.quit();
});

describe('the run store on a Redis that lost its scripts', () => {
  it('loads a script again when Redis answers NOSCRIPT (restarted or flushed server)', async () => {
    const store = new RunStore(redis, prefix, 60);
    const spec = { run_id: 'run_scripts-1', agent: 'a', input: 'hi', config: null, exec_config: null, trace: {} };
    const enqueued = { kind: 'RunEnqueued', step_id: 's1', agent: 'a' } as const;
    expect(await store.createRun(spec, undefined, enqueued)).toEqual({ created: true, run_id: 'run_scripts-1' });
    // What a restarted Redis looks like to a long-running worker: its script cache is empty.
    await redis.script('FLUSH');
    expect(await store.createRun({ ...spec, run_id: 'run_scripts-2' }, undefined, enqueued)).toEqual({ created: true, run_id: 'run_scripts-2' });
    expect((await store.events('run_scripts-2')).map((event) => event.kind)).toEqual(['RunEnqueued']);
  });
});
