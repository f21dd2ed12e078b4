import { silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { startPrivateCluster } from '@arcflow/testing';
import { Redis } from 'ioredis';
import { benchNoop, provider } from './agents.ts';
import { redisCpuSeconds } from './lib.ts';

const RUNS = 150;
const FAN = 8;
const PARTITIONS = 8;

export interface ClusterThroughput {
  readonly callsPerSecond: number;
  /** Per node: its share of the store's and BullMQ's script calls, and its Redis CPU per tool call (µs). */
  readonly nodes: readonly { readonly scriptShare: number; readonly cpuPerCallUs: number }[];
}

/**
 * Tool calls per second with one in-process worker on a private Redis Cluster of `masters` nodes
 * (8 partitions), and how the work split over the nodes (script calls and CPU, from each node's
 * INFO deltas). Runs of 8 no-op calls, a few at a time.
 */
export async function clusterThroughput(masters: number): Promise<ClusterThroughput> {
  const cluster = await startPrivateCluster(masters);
  const prefix = `bench-cluster-${masters}`;
  const nodes = cluster.ports.map((port) => new Redis(port, '127.0.0.1'));
  // One node listed twice: cluster mode (ioredis's Cluster client) on one node too, as on three.
  const url = masters === 1 ? `${cluster.url},${cluster.url}` : cluster.url;
  const worker = await startWorker({ agents: [benchNoop], provider, redis: url, prefix, partitions: PARTITIONS, logger: silentLogger });
  const client = createClient({ redis: url, prefix });
  try {
    const sample = () => Promise.all(nodes.map(async (node) => ({ cpu: await redisCpuSeconds(node), scripts: scriptCalls(await node.info('commandstats')) })));
    const before = await sample();
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < RUNS) {
          const { run_id } = await client.enqueue({ agent: benchNoop.name, input: `cluster ${next++} fan=${FAN}` });
          const run = await client.wait(run_id, { timeout_ms: 60_000 });
          if (run.status !== 'completed') throw new Error(`bench run ${run_id} ended ${run.status}`);
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const after = await sample();
    const calls = RUNS * FAN;
    const scripts = after.map((node, index) => node.scripts - before[index]!.scripts);
    const total = scripts.reduce((sum, count) => sum + count, 0);
    return {
      callsPerSecond: calls / seconds,
      nodes: after.map((node, index) => ({ scriptShare: scripts[index]! / total, cpuPerCallUs: ((node.cpu - before[index]!.cpu) * 1e6) / calls })),
    };
  } finally {
    await client.close();
    await worker.close();
    for (const node of nodes) node.disconnect();
    await cluster.close();
  }
}

function scriptCalls(stats: string): number {
  let calls = 0;
  for (const [, count] of stats.matchAll(/cmdstat_(?:evalsha|eval|fcall):calls=(\d+)/g)) calls += Number(count);
  return calls;
}

/** Redis CPU an idle worker process costs a private 3-master cluster, per partition count (ms per second over the nodes, above the cluster's own). */
export async function idleWorkerCost(partitionCounts: readonly number[], windowMs = 6_000): Promise<{ cluster: number; byPartitions: ReadonlyMap<number, number> }> {
  const cluster = await startPrivateCluster(3);
  const nodes = cluster.ports.map((port) => new Redis(port, '127.0.0.1'));
  const cpuOver = async () => {
    const total = async () => (await Promise.all(nodes.map((node) => redisCpuSeconds(node)))).reduce((sum, cpu) => sum + cpu, 0);
    const before = await total();
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    return (((await total()) - before) * 1000) / (windowMs / 1000);
  };
  try {
    const alone = await cpuOver();
    const byPartitions = new Map<number, number>();
    for (const partitions of partitionCounts) {
      const worker = await startWorker({ agents: [benchNoop], provider, redis: cluster.url, prefix: `bench-idle-${partitions}`, partitions, logger: silentLogger });
      // Past its start-up (queues created, first heartbeat), as a worker waiting for work is.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      byPartitions.set(partitions, (await cpuOver()) - alone);
      await worker.close();
    }
    return { cluster: alone, byPartitions };
  } finally {
    for (const node of nodes) node.disconnect();
    await cluster.close();
  }
}
