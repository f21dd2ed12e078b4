import { Agent, silentLogger, tool, toolDefinitionHash } from '@arcflow/core';
import { JobId, QueueName, connectRedis, createClient, startWorker } from '@arcflow/queue';
import { openaiProvider } from '@arcflow/provider-openai';
import { type PrivateCluster, capturingLogger, reply, scriptedProvider, startFakeOpenAI, testCluster, testPrefix, toolCalls } from '@arcflow/testing';
import { startServer } from '@arcflow/server';
import { Dispatcher } from '../src/jobs/dispatcher.ts';
import { keysFor } from '../src/redis/keys.ts';
import { defineBudgetScenarios, defineHostileOutputScenarios, defineLoopScenarios, defineWorkflowScenarios } from '@arcflow/testing/scenarios';
import { Queue } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAST, collect, engineRunner, until } from './harness.ts';

/**
 * A 3-master Redis Cluster (the one .ci/run started, or this file's own: see testCluster); REDIS_URL
 * lists its nodes, so arcflow runs in cluster mode, with 8 partitions.
 */
let cluster: PrivateCluster;
const target: { redis?: string; partitions: number } = { partitions: 8 };

beforeAll(async () => {
  cluster = await testCluster(3);
  target.redis = cluster.url;
}, 60_000);
afterAll(async () => {
  await cluster?.close();
});

const nextPrefix = () => testPrefix('cluster');
defineLoopScenarios('queue engine on a 3-master Redis Cluster', engineRunner(nextPrefix, target));
defineHostileOutputScenarios('queue engine on a 3-master Redis Cluster', engineRunner(nextPrefix, target));
defineWorkflowScenarios('queue engine on a 3-master Redis Cluster', engineRunner(nextPrefix, target));
defineBudgetScenarios('queue engine on a 3-master Redis Cluster', engineRunner(nextPrefix, target));

const noop = tool({ name: 'spread_noop', description: 'nothing', input_schema: { type: 'object' }, handler: async () => 'ok' });
const spread = new Agent({ name: 'spread_agent', tools: [noop] });

/** Per node: the run keys it holds and the scripts it has run so far (compare two readings: the cluster may be shared). */
async function perNode(prefix: string): Promise<{ runKeys: number; scripts: number }[]> {
  return Promise.all(
    cluster.ports.map(async (port) => {
      const node = new Redis(port, '127.0.0.1');
      try {
        const keys = await node.keys(`{${prefix}~p*}:run:*`);
        const stats = await node.info('commandstats');
        const scripts = Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0);
        return { runKeys: keys.length, scripts };
      } finally {
        node.disconnect();
      }
    }),
  );
}

describe('partitions on a Redis Cluster', () => {
  it('spreads a batch of runs over every master, each run in the partition its id names', async () => {
    const prefix = testPrefix('cluster-spread');
    const worker = await startWorker({ agents: [spread], provider: scriptedProvider([], { repeat: false }), redis: cluster.url, prefix, partitions: 8, logger: silentLogger });
    const client = createClient({ redis: cluster.url, prefix });
    try {
      const before = await perNode(prefix);
      const ids: string[] = [];
      // The master with 2 of the 8 partitions gets none of n runs with chance (6/8)^n: 1e-6 for 48.
      for (let index = 0; index < 48; index += 1) {
        ids.push(
          (
            await client.enqueue({
              agent: 'spread_agent',
              input: `run ${index}`,
              exec_config: { test: { steps: { s1: { responses: [{ tool_calls: [{ name: 'spread_noop', arguments: {} }] }, { output: 'done' }] } } } },
            })
          ).run_id,
        );
      }
      const runs = await Promise.all(ids.map((run_id) => client.wait(run_id, { timeout_ms: 20_000 })));
      expect(runs.every((run) => run.status === 'completed')).toBe(true);
      expect(new Set(runs.map((run) => run.partition)).size).toBeGreaterThan(3);
      for (const run of runs) expect(run.run_id).toMatch(new RegExp(`^run_p${run.partition}_`));
      const nodes = await perNode(prefix);
      expect(nodes.every((node, index) => node.runKeys > 0 && node.scripts > before[index]!.scripts)).toBe(true);
      expect((await client.list({ limit: 100 })).runs).toHaveLength(48);
    } finally {
      await client.close();
      await worker.close();
    }
  });

  it("keeps a tool's concurrency cap across partitions", async () => {
    const prefix = testPrefix('cluster-cap');
    let running = 0;
    let most = 0;
    const capped = tool({
      name: 'capped_tool',
      description: 'two at a time',
      input_schema: { type: 'object' },
      concurrency: 2,
      handler: async () => {
        running += 1;
        most = Math.max(most, running);
        await new Promise((resolve) => setTimeout(resolve, 100));
        running -= 1;
        return 'ok';
      },
    });
    const agent = new Agent({ name: 'capped_agent', tools: [capped] });
    const workers = await Promise.all(
      [1, 2].map(() => startWorker({ agents: [agent], provider: scriptedProvider([], { repeat: false }), redis: cluster.url, prefix, partitions: 8, logger: silentLogger })),
    );
    const client = createClient({ redis: cluster.url, prefix });
    try {
      const script = { test: { steps: { s1: { responses: [{ tool_calls: [{ name: 'capped_tool', arguments: {} }] }, { output: 'done' }] } } } };
      const ids = await Promise.all(Array.from({ length: 12 }, (_, index) => client.enqueue({ agent: 'capped_agent', input: `cap ${index}`, exec_config: script })));
      expect(new Set(ids.map(({ run_id }) => /^run_p(\d+)_/.exec(run_id)?.[1])).size).toBeGreaterThan(2);
      const runs = await Promise.all(ids.map(({ run_id }) => client.wait(run_id, { timeout_ms: 30_000 })));
      expect(runs.every((run) => run.status === 'completed')).toBe(true);
      expect(most).toBe(2);
    } finally {
      await client.close();
      await Promise.all(workers.map((worker) => worker.close()));
    }
  });

  it('pauses the provider for every partition on a 429, and cancels a run in any partition', async () => {
    const prefix = testPrefix('cluster-429');
    const server = await startFakeOpenAI({
      turns: [
        { type: 'status', status: 429, headers: { 'retry-after': '1' } },
        { type: 'text', content: 'after the wait' },
      ],
    });
    let aborted = 0;
    const hold = tool({
      name: 'hold_until_cancelled',
      description: 'waits for its signal',
      input_schema: { type: 'object' },
      timeout_ms: 30_000,
      handler: (_args: unknown, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve(`aborted ${++aborted}`))),
    });
    const agents = [new Agent({ name: 'limited' }), new Agent({ name: 'slowpoke', tools: [hold] })];
    const worker = await startWorker({
      agents,
      provider: openaiProvider({ base_url: server.url, api_key: 'k' }),
      redis: cluster.url,
      prefix,
      partitions: 4,
      provider_attempts: 1,
      logger: silentLogger,
    });
    const client = createClient({ redis: cluster.url, prefix });
    const pool = new Dispatcher(
      new Cluster(
        cluster.ports.map((port) => ({ host: '127.0.0.1', port })),
        { redisOptions: { maxRetriesPerRequest: null } },
      ) as never,
      keysFor(prefix),
    );
    try {
      const { run_id } = await client.enqueue({ agent: 'limited', input: 'hi' });
      // One pause for the provider, whatever partition a call's run is in: a key under the prefix's own tag.
      const pauseKey = keysFor(prefix).providerPause('openai');
      const reader = new Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })));
      let pausedMs = 0;
      try {
        for (let tries = 0; tries < 100 && pausedMs <= 0; tries += 1) {
          pausedMs = await reader.pttl(pauseKey);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } finally {
        reader.disconnect();
      }
      expect(pausedMs).toBeGreaterThan(0);
      expect(await client.wait(run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', output: 'after the wait' });

      const script = { test: { steps: { s1: { responses: [{ tool_calls: [{ name: 'hold_until_cancelled', arguments: {} }] }, { output: 'never' }] } } } };
      const held = await Promise.all([1, 2, 3].map((n) => client.enqueue({ agent: 'slowpoke', input: `hold ${n}`, exec_config: script })));
      await until(
        async () => (await Promise.all(held.map(({ run_id }) => collect(client, run_id)))).every((events) => events.some((event) => event.kind === 'ToolCallStarted')),
        20_000,
        50,
      );
      for (const { run_id } of held) expect(await client.cancel(run_id)).toEqual({ cancelled: true, status: 'cancelled' });
      await until(async () => aborted === 3, 10_000, 20);
    } finally {
      await pool.close();
      await client.close();
      await worker.close();
      await server.close();
    }
  });

  it('grows from 4 to 8 partitions with runs in flight: all complete, and an idempotency key keeps its run', async () => {
    const prefix = testPrefix('cluster-grow');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const held = tool({
      name: 'held_tool',
      description: 'waits for the test',
      input_schema: { type: 'object' },
      timeout_ms: 30_000,
      handler: async () => (await gate, 'released'),
    });
    const agent = new Agent({ name: 'grow_agent', tools: [held] });
    const provider = {
      id: 'fixture',
      defaultModel: 'm',
      complete: async (request: { messages: readonly { role: string }[] }) =>
        request.messages.some((message) => message.role === 'tool') ? reply('done') : toolCalls([{ name: 'held_tool', args: {} }]),
    };
    const first = await startWorker({ agents: [agent], provider, redis: cluster.url, prefix, partitions: 4, logger: silentLogger });
    const client = createClient({ redis: cluster.url, prefix });
    try {
      const keyed = await client.enqueue({ agent: 'grow_agent', input: 'keyed', idempotency_key: 'order-42' });
      const before = await Promise.all([1, 2, 3, 4, 5, 6].map((n) => client.enqueue({ agent: 'grow_agent', input: `before ${n}` })));
      expect(before.every(({ run_id }) => Number(/^run_p(\d+)_/.exec(run_id)?.[1]) < 4)).toBe(true);
      const second = await startWorker({ agents: [agent], provider, redis: cluster.url, prefix, partitions: 8, logger: silentLogger });
      try {
        await new Promise((resolve) => setTimeout(resolve, 5_500));
        // Each run lands in partitions 4-7 with chance 1/2; 24 runs all missing them is a 1-in-16-million event.
        const after = await Promise.all(Array.from({ length: 24 }, (_, n) => client.enqueue({ agent: 'grow_agent', input: `after ${n}` })));
        expect(after.some(({ run_id }) => Number(/^run_p(\d+)_/.exec(run_id)?.[1]) >= 4)).toBe(true);
        expect(await client.enqueue({ agent: 'grow_agent', input: 'keyed', idempotency_key: 'order-42' })).toEqual({ run_id: keyed.run_id, created: false });
        release();
        const all = [keyed, ...before, ...after];
        const runs = await Promise.all(all.map(({ run_id }) => client.wait(run_id, { timeout_ms: 30_000 })));
        expect(runs.map((run) => run.status)).toEqual(all.map(() => 'completed'));
      } finally {
        await second.close();
      }
    } finally {
      release();
      await client.close();
      await first.close();
    }
  });
});

describe('the watchdog on a Redis Cluster', () => {
  it("re-adds a partitioned run's tool job deleted by hand, in the run's own partition, and the run completes", async () => {
    const prefix = testPrefix('cluster-watchdog');
    const provider = scriptedProvider([toolCalls([{ name: 'spread_noop', args: {}, id: 'c1' }]), reply('done')]);
    const logger = capturingLogger();
    const common = { agents: [spread], redis: cluster.url, prefix, partitions: 8, logger, ...FAST, watchdog_ms: 400 };
    const providerWorker = await startWorker({ ...common, provider, roles: ['provider'] });
    const client = createClient({ redis: cluster.url, prefix });
    const connection = connectRedis(cluster.url, { maxRetriesPerRequest: null });
    const { run_id } = await client.enqueue({ agent: 'spread_agent', input: 'watched' });
    const toolQueue = new Queue(QueueName.tool('spread_noop', toolDefinitionHash(noop)), { connection, prefix: keysFor(prefix).tagOf(run_id) });
    const toolJobId = JobId.tool(run_id, 's1', 1, 'c1');
    let toolWorker: Awaited<ReturnType<typeof startWorker>> | undefined;
    try {
      expect(run_id).toMatch(/^run_p\d+_/);
      await until(async () => (await toolQueue.getJobState(toolJobId)) === 'prioritized', 10_000);
      await toolQueue.remove(toolJobId);
      toolWorker = await startWorker({ ...common, roles: ['tools'] });
      const run = await client.wait(run_id, { timeout_ms: 15_000 });
      expect(run).toMatchObject({ status: 'completed', output: 'done' });
      const events = await collect(client, run_id);
      expect(events.filter((event) => event.kind === 'ToolCallCompleted')).toHaveLength(1);
      expect(logger.lines.some((line) => line.startsWith('watchdog re-added the next job'))).toBe(true);
    } finally {
      await toolQueue.close();
      await client.close();
      await Promise.all([providerWorker.close(), toolWorker?.close()]);
      connection.disconnect();
    }
  });
});

describe('arcflow serve on a Redis Cluster', () => {
  it('enqueues over HTTP and streams a partitioned run to its end', async () => {
    const prefix = testPrefix('cluster-serve');
    const worker = await startWorker({ agents: [spread], provider: scriptedProvider([], { repeat: false }), redis: cluster.url, prefix, partitions: 8, logger: silentLogger });
    const server = await startServer({ redis: cluster.url, prefix, port: 0, log: false });
    try {
      const script = { test: { steps: { s1: { responses: [{ tool_calls: [{ name: 'spread_noop', arguments: {} }] }, { output: 'done' }] } } } };
      const created = await fetch(`${server.url}/v1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ agent: 'spread_agent', input: 'over http', exec_config: script }),
      });
      const { run_id } = (await created.json()) as { run_id: string };
      expect(run_id).toMatch(/^run_p\d+_/);
      const stream = await fetch(`${server.url}/v1/runs/${run_id}/events`, { headers: { accept: 'text/event-stream' } });
      const text = await stream.text();
      expect(text).toContain('event: RunCompleted');
      expect((await (await fetch(`${server.url}/v1/runs/${run_id}`)).json()) as { status: string; partition: number }).toMatchObject({
        status: 'completed',
        partition: Number(/^run_p(\d+)_/.exec(run_id)![1]),
      });
    } finally {
      await server.close();
      await worker.close();
    }
  });
});
