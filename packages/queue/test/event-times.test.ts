import { Agent, silentLogger, tool } from '@arcflow/core';
import { RunStore, createClient, keysFor, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, reply, scriptedProvider, testPrefix, toolCalls } from '@arcflow/testing';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { collect } from './harness.ts';

// SPEC §4: a run's events are an ordered log; each event's `ts` is never earlier than the one
// before it, though processes stamp events where they make them and their writes land in any order.

const prefix = testPrefix('event-times');
const redis = new Redis(TEST_REDIS_URL);
const lookup = tool({ name: 'lookup', description: 'looks up', input_schema: { type: 'object' }, handler: async () => 'found' });
const agent = new Agent({ name: 'times', tools: [lookup], loop_detection: false });
const calls = Array.from({ length: 60 }, (_, index) => ({ name: 'lookup', args: { n: index }, id: `c${index}` }));
const worker = await startWorker({
  agents: [agent],
  provider: scriptedProvider([toolCalls(calls), reply('done')], { repeat: true }),
  redis: TEST_REDIS_URL,
  prefix,
  logger: silentLogger,
});
const client = createClient({ redis: TEST_REDIS_URL, prefix });

afterAll(async () => {
  await client.close();
  await worker.close();
  await cleanupPrefix(prefix);
  await redis.quit();
});

const decreases = (times: readonly number[]) => times.filter((ts, index) => index > 0 && ts < times[index - 1]!);

describe("a run's events in time", () => {
  it('never go back in ts along seq, with 60 calls recording at once', async () => {
    const { run_id } = await client.enqueue({ agent: 'times', input: 'go' });
    await client.wait(run_id, { timeout_ms: 20_000 });
    expect(decreases((await collect(client, run_id)).map((event) => event.ts))).toEqual([]);
  });

  it('read whole, or from any point as a follower does, give a late-stamped event the time of the one before it', async () => {
    // A log as processes whose writes landed out of their stamps' order would leave it.
    const run_id = 'run_latestampedlogxxxxxxx';
    const stamps = [100, 200, 150, 300, 250, 260];
    await redis.rpush(
      keysFor(prefix).run(run_id).events,
      ...stamps.map((ts) => JSON.stringify({ kind: 'DefinitionChanged', step_id: 's1', ts, previous_hash: 'a', current_hash: 'b' })),
    );
    const store = new RunStore(redis, prefix, 60);
    expect((await collect(client, run_id)).map((event) => event.ts)).toEqual([100, 200, 200, 300, 300, 300]);
    expect((await store.events(run_id, 3, 200)).map((event) => [event.seq, event.ts])).toEqual([
      [4, 300],
      [5, 300],
      [6, 300],
    ]);
  });
});
