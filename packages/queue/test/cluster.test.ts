import type { TraceEvent } from '@arcflow/core';
import { createClient } from '@arcflow/queue';
import { type PrivateCluster, assertEventInvariants, startPrivateCluster, testPrefix } from '@arcflow/testing';
import { defineBudgetScenarios, defineLoopScenarios, defineWorkflowScenarios } from '@arcflow/testing/scenarios';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collect, engineRunner, until } from './harness.ts';

/** A 3-master Redis Cluster of this file's own; REDIS_URL lists its nodes, so arcflow runs in cluster mode. */
let cluster: PrivateCluster;
const target: { redis?: string } = {};
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  cluster = await startPrivateCluster(3);
  target.redis = cluster.url;
}, 60_000);
afterAll(async () => {
  for (const worker of workers) worker.kill('SIGKILL');
  await cluster?.close();
});

const nextPrefix = () => testPrefix('cluster');
defineLoopScenarios('queue engine on a 3-master Redis Cluster', engineRunner(nextPrefix, target));
defineWorkflowScenarios('queue engine on a 3-master Redis Cluster', engineRunner(nextPrefix, target));
defineBudgetScenarios('queue engine on a 3-master Redis Cluster', engineRunner(nextPrefix, target));

describe('worker processes on a Redis Cluster', () => {
  it('finish a run after SIGKILL mid-tool, with REDIS_URL listing the nodes', async () => {
    const prefix = testPrefix('cluster-crash');
    const env = { REDIS_URL: cluster.url, ARCFLOW_PREFIX: prefix };
    const fixture = new URL('./fixtures/crash-agents.ts', import.meta.url).pathname;
    const first = await spawnWorker(fixture, { env });
    workers.push(first);
    const client = createClient({ redis: cluster.url, prefix });
    const nodes = new Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })));
    try {
      const { run_id } = await client.enqueue({ agent: 'crash_agent', input: 'go' });
      await until(async () => Number((await nodes.get(`{${prefix}}:test:exec:block`)) ?? 0) === 1, 20_000, 50);
      first.kill('SIGKILL');
      await first.exited;
      workers.push(await spawnWorker(fixture, { env }));
      const run = await client.wait(run_id, { timeout_ms: 30_000 });
      expect(run.status).toBe('completed');
      const events: TraceEvent[] = await collect(client, run_id);
      assertEventInvariants(events);
    } finally {
      await client.close();
      nodes.disconnect();
    }
  });
});
