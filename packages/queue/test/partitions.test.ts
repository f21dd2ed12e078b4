import { Agent, ConfigError, newRunId, silentLogger, tool } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, capturingLogger, reply, scriptedProvider, testPrefix, toolCall } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { resolveWorkerOptions } from '../src/config/options.ts';
import { keysFor } from '../src/redis/keys.ts';
import { partitionOf, partitionOfKey, partitionedRunId } from '../src/redis/partitions.ts';
import { ThreadStore } from '../src/threads/thread-store.ts';
import { FAST, testResources, until } from './harness.ts';

const { prefixes, open, redis } = testResources();

/** An agent whose one tool notes which worker group ran each run's call. */
function groupAgent(group: string, ranBy: Map<string, string>): Agent {
  const noted = tool({
    name: 'part_note',
    description: 'notes its worker group',
    input_schema: { type: 'object' },
    handler: (_args, call) => {
      ranBy.set(call.run_id, group);
      return group;
    },
  });
  return new Agent({ name: 'part_agent', tools: [noted] });
}

const model = () => scriptedProvider([(request) => (request.messages.some((message) => message.role === 'tool') ? reply('done') : toolCall('part_note', {}))], { repeat: true });

describe('run ids and their partitions', () => {
  it('keeps every run with an unmarked id under the prefix tag, and a marked one in its partition', () => {
    const keys = keysFor('ids');
    // A random id read as partitioned would live in a partition no worker of a one-partition deployment serves.
    for (let index = 0; index < 100_000; index += 1) {
      const run_id = newRunId();
      if (partitionOf(run_id) !== undefined || keys.tagOf(run_id) !== keys.tag) throw new Error(`${run_id} reads as partitioned`);
    }
    const marked = partitionedRunId(5);
    expect(partitionOf(marked)).toBe(5);
    expect(keys.tagOf(marked)).not.toBe(keys.tag);
  });
});

describe('a client that read before any worker started', () => {
  it('spreads its runs as soon as the first worker has made the partition map', async () => {
    const prefix = testPrefix('partitions-first');
    prefixes.push(prefix);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    expect((await client.list({ limit: 1 })).runs).toEqual([]);
    open.push(await startWorker({ agents: [groupAgent('any', new Map())], provider: model(), redis: TEST_REDIS_URL, prefix, partitions: 4, logger: silentLogger, ...FAST }));
    const { run_id } = await client.enqueue({ agent: 'part_agent', input: 'go' });
    expect(partitionOf(run_id)).toBeGreaterThanOrEqual(0);
    expect((await client.wait(run_id, { timeout_ms: 10_000 })).status).toBe('completed');
  });
});

describe("a client's first waits", () => {
  it('all return while its subscriber connects, whichever partitions they subscribe to and whenever they start', async () => {
    const prefix = testPrefix('partitions-subscribe');
    prefixes.push(prefix);
    open.push(await startWorker({ agents: [groupAgent('any', new Map())], provider: model(), redis: TEST_REDIS_URL, prefix, partitions: 8, logger: silentLogger, ...FAST }));
    const first = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(first);
    const ids: string[] = [];
    while (new Set(ids.map((run_id) => partitionOf(run_id))).size < 6) ids.push((await first.enqueue({ agent: 'part_agent', input: `run ${ids.length}` })).run_id);
    for (const run_id of ids) expect((await first.wait(run_id, { timeout_ms: 10_000 })).status).toBe('completed');
    // Waits begun at staggered moments land while each fresh client's subscriber is still connecting.
    for (let round = 0; round < 10; round += 1) {
      const client = createClient({ redis: TEST_REDIS_URL, prefix });
      open.push(client);
      const waits = ids.map(
        (run_id, index) =>
          new Promise<string>((resolve, reject) =>
            setTimeout(() => client.wait(run_id, { timeout_ms: 5_000 }).then((run) => resolve(run.status), reject), index * (round % 5) * 0.3),
          ),
      );
      expect(await Promise.all(waits)).toEqual(ids.map(() => 'completed'));
    }
  });
});

describe('a partition map another process wrote', () => {
  it('is refused with the key it read, by clients and workers, and nothing is written', async () => {
    const prefix = testPrefix('partitions-garbage');
    prefixes.push(prefix);
    const keys = keysFor(prefix);
    open.push(await startWorker({ agents: [groupAgent('any', new Map())], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
    await redis.set(keys.partitions, 'lots');
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const refusal = `the partition map ${keys.partitions} holds "lots", not a partition count (a power of two from 1 to 1024); workers write it from ARCFLOW_PARTITIONS`;
    await expect(client.enqueue({ agent: 'part_agent', input: 'go' })).rejects.toThrow(refusal);
    await expect(client.list({ limit: 10 })).rejects.toThrow(refusal);
    expect(await redis.keys(`{${prefix}}:run:*`)).toEqual([]);
    await expect(startWorker({ agents: [groupAgent('any', new Map())], provider: model(), redis: TEST_REDIS_URL, prefix, partitions: 4, logger: silentLogger })).rejects.toThrow(
      new ConfigError(refusal),
    );
    await redis.set(keys.partitions, '3');
    await expect(createClient({ redis: TEST_REDIS_URL, prefix }).enqueue({ agent: 'part_agent', input: 'go' })).rejects.toThrow('holds "3", not a partition count');
    expect(await redis.get(keys.partitions)).toBe('3');
  });
});

describe('workers serving some partitions only (serve_partitions)', () => {
  it('leaves runs of partitions nobody serves queued, and each group runs only its own partitions', async () => {
    const prefix = testPrefix('partitions');
    prefixes.push(prefix);
    const ranBy = new Map<string, string>();
    const start = async (group: string, serve_partitions: number[]) => {
      const worker = await startWorker({
        agents: [groupAgent(group, ranBy)],
        provider: model(),
        redis: TEST_REDIS_URL,
        prefix,
        partitions: 4,
        serve_partitions,
        logger: silentLogger,
        ...FAST,
      });
      open.push(worker);
    };
    await start('low', [0, 1]);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    // Some partition of the 4 gets none of n runs with chance 4 x (3/4)^n: 4e-8 for 64.
    const runs = await Promise.all(Array.from({ length: 64 }, (_, index) => client.enqueue({ agent: 'part_agent', input: `run ${index}` })));
    const partitionOf = new Map(runs.map((run) => [run.run_id, Number(/^run_p(\d+)_/.exec(run.run_id)![1])]));
    expect(new Set(partitionOf.values())).toEqual(new Set([0, 1, 2, 3]));
    const low = runs.filter((run) => partitionOf.get(run.run_id)! < 2);
    const high = runs.filter((run) => partitionOf.get(run.run_id)! >= 2);
    for (const run of low) expect((await client.wait(run.run_id, { timeout_ms: 10_000 })).status).toBe('completed');
    // Nobody serves partitions 2 and 3 yet: their runs have not started.
    for (const run of high) expect((await client.get(run.run_id))?.status).toBe('queued');
    await start('high', [2, 3]);
    for (const run of high) expect((await client.wait(run.run_id, { timeout_ms: 10_000 })).status).toBe('completed');
    for (const run of runs) expect(ranBy.get(run.run_id)).toBe(partitionOf.get(run.run_id)! < 2 ? 'low' : 'high');
    // Each process counts once, whichever partitions it serves.
    expect((await client.queues()).find((queue) => queue.name === 'agent-part_agent')?.workers).toBe(2);
  });

  it('serves a listed partition once the map grows to include it', async () => {
    const prefix = testPrefix('partitions-grow');
    prefixes.push(prefix);
    const ranBy = new Map<string, string>();
    // Serves partitions 2 and 3, which do not exist while the map has 2.
    open.push(
      await startWorker({
        agents: [groupAgent('upper', ranBy)],
        provider: model(),
        redis: TEST_REDIS_URL,
        prefix,
        partitions: 2,
        serve_partitions: [0, 1, 2, 3],
        logger: silentLogger,
        ...FAST,
        heartbeat_ms: 100,
      }),
    );
    open.push(
      await startWorker({
        agents: [groupAgent('grower', ranBy)],
        provider: model(),
        redis: TEST_REDIS_URL,
        prefix,
        partitions: 4,
        serve_partitions: [0],
        logger: silentLogger,
        ...FAST,
      }),
    );
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    // The client reads the grown map within its cache time; wait until new runs land in partitions 2 and 3.
    let runs: { run_id: string }[] = [];
    await until(
      async () => {
        runs = await Promise.all(Array.from({ length: 8 }, (_, index) => client.enqueue({ agent: 'part_agent', input: `grown ${index}` })));
        return runs.some((run) => /^run_p[23]_/.test(run.run_id));
      },
      15_000,
      500,
    );
    for (const run of runs) expect((await client.wait(run.run_id, { timeout_ms: 10_000 })).status).toBe('completed');
    for (const run of runs.filter((run) => /^run_p[23]_/.test(run.run_id))) expect(ranBy.get(run.run_id)).toBe('upper');
  });

  it('keeps an idempotency key to its run, and a thread to its partition, when a client that read the map before it grew repeats the key or the thread', async () => {
    const prefix = testPrefix('partitions-key');
    prefixes.push(prefix);
    const worker = (partitions: number) =>
      startWorker({ agents: [groupAgent('any', new Map())], provider: model(), redis: TEST_REDIS_URL, prefix, partitions, logger: silentLogger, ...FAST });
    open.push(await worker(2));
    const early = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(early);
    const earlyOnThread = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(earlyOnThread);
    // These clients have read the map at 2 partitions, and keep what they read for a few seconds.
    await early.enqueue({ agent: 'part_agent', input: 'first' });
    await earlyOnThread.enqueue({ agent: 'part_agent', input: 'first' });
    open.push(await worker(4));
    const late = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(late);
    // A key that 4 partitions put in partition 2 or 3, where a client at 2 partitions would not look.
    const key = Array.from({ length: 100 }, (_, index) => `order-${index}`).find((candidate) => partitionOfKey(candidate, 4) >= 2)!;
    const first = await late.enqueue({ agent: 'part_agent', input: 'keyed', idempotency_key: key });
    expect(first).toMatchObject({ created: true, run_id: expect.stringMatching(/^run_p[23]_/) });
    expect(await early.enqueue({ agent: 'part_agent', input: 'keyed', idempotency_key: key })).toEqual({ run_id: first.run_id, created: false });
    // The same for a thread: its next run goes where the thread lives.
    const thread_id = Array.from({ length: 100 }, (_, index) => `chat-${index}`).find((candidate) => (ThreadStore.partitionOf(candidate, 4) ?? 0) >= 2)!;
    const opened = await late.enqueue({ agent: 'part_agent', input: 'hello', thread_id });
    const next = await earlyOnThread.enqueue({ agent: 'part_agent', input: 'again', thread_id });
    expect(next.run_id.slice(0, 'run_p2_'.length)).toBe(opened.run_id.slice(0, 'run_p2_'.length));
  });

  it('warns which partitions no live worker serves, and stops once they are served', async () => {
    const prefix = testPrefix('partitions-gap');
    prefixes.push(prefix);
    const logger = capturingLogger();
    const gapWarnings = () => logger.lines.filter((line) => line.startsWith('no live worker serves these partitions'));
    const start = async (serve_partitions: number[]) =>
      open.push(
        await startWorker({
          agents: [groupAgent('any', new Map())],
          provider: model(),
          redis: TEST_REDIS_URL,
          prefix,
          partitions: 4,
          serve_partitions,
          logger,
          ...FAST,
          heartbeat_ms: 100,
          watchdog_ms: 200,
        }),
      );
    await start([0, 1]);
    await until(async () => gapWarnings().length > 0, 10_000, 50);
    expect(gapWarnings()[0]).toBe(
      'no live worker serves these partitions of an agent: their runs wait until one does (ARCFLOW_SERVE_PARTITIONS) {"agent":"part_agent","partitions":[2,3]}',
    );
    await start([2, 3]);
    // Once the second group has announced itself, scans (every 100 ms) find every partition served.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const before = gapWarnings().length;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(gapWarnings().length).toBe(before);
  });

  it('refuses partition numbers that are not whole numbers from 0 to 1023, and an empty list', () => {
    const base = { agents: [], roles: ['tools'] as const };
    for (const serve_partitions of [[-1], [1.5], [1024], []]) {
      expect(() => resolveWorkerOptions({ ...base, serve_partitions })).toThrow(ConfigError);
    }
    expect(() => resolveWorkerOptions({ ...base, serve_partitions: [1024] })).toThrow('serve_partitions must hold partition numbers from 0 to 1023, got 1024');
    expect(resolveWorkerOptions({ ...base, serve_partitions: [3, 0, 3] }).serve_partitions).toEqual(new Set([0, 3]));
  });
});
