import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { answers, freePort } from './private-redis.ts';
import { deleteMatching } from './redis.ts';

const run = promisify(execFile);

/** A Redis Cluster of a test's own: masters on free loopback ports, slots spread over them. */
export interface PrivateCluster {
  /** Every node, comma-separated: the `REDIS_URL` of cluster mode. */
  readonly url: string;
  readonly ports: readonly number[];
  /** Kills every node and removes their directories. */
  close(): Promise<void>;
}

/** Starts `masters` cluster-enabled `redis-server`s (no replicas), slots split evenly, joined into one cluster. */
export async function startPrivateCluster(masters = 3): Promise<PrivateCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'arcflow-cluster-'));
  const ports: number[] = [];
  for (let index = 0; index < masters; index += 1) ports.push(await freePort());
  const children: ChildProcess[] = ports.map((port) =>
    spawn(
      'redis-server',
      // The announced address: a node that never met another one would otherwise report an empty one.
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--cluster-announce-ip',
        '127.0.0.1',
        '--dir',
        dir,
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${port}.conf`,
        '--save',
        '',
        '--appendonly',
        'no',
      ],
      { stdio: 'ignore' },
    ),
  );
  const close = async () => {
    await Promise.all(
      children.map((child) => {
        if (child.exitCode !== null) return undefined;
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        return exited;
      }),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(ports.map((port) => answers(port)));
    if (masters >= 3) {
      await run('redis-cli', ['--cluster', 'create', ...ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', '0', '--cluster-yes'], { timeout: 30_000 });
    } else {
      // redis-cli creates clusters of 3 masters or more: smaller ones get their slots by hand.
      const share = Math.ceil(16_384 / masters);
      for (const [index, port] of ports.entries()) {
        await run('redis-cli', ['-p', String(port), 'cluster', 'addslotsrange', String(index * share), String(Math.min(16_383, (index + 1) * share - 1))]);
        if (index > 0) await run('redis-cli', ['-p', String(port), 'cluster', 'meet', '127.0.0.1', String(ports[0])]);
      }
    }
    await Promise.all(ports.map((port) => clusterReady(port)));
  } catch (error) {
    await close();
    throw error;
  }
  return { url: ports.map((port) => `redis://127.0.0.1:${port}`).join(','), ports, close };
}

/**
 * The cluster a test file runs against: the one `ARCFLOW_TEST_CLUSTER` lists (comma-separated
 * node URLs; `.ci/run` starts a 3-master cluster and sets it), else a private one of `masters`
 * nodes. Closing a shared cluster deletes what this process's test prefixes left on each node.
 */
export async function testCluster(masters = 3): Promise<PrivateCluster> {
  const shared = process.env.ARCFLOW_TEST_CLUSTER;
  if (!shared) return startPrivateCluster(masters);
  const urls = shared.split(',').map((url) => new URL(url.trim()));
  for (const url of urls) await clusterReady(Number(url.port), 20_000, url.hostname);
  const ports = urls.map((url) => Number(url.port));
  return { url: urls.map((url) => `redis://${url.host}`).join(','), ports, close: () => deleteTestKeys(urls) };
}

/** Deletes, node by node, the keys under this process's test prefixes (see testPrefix). */
async function deleteTestKeys(nodes: readonly URL[]): Promise<void> {
  for (const node of nodes) {
    const redis = new Redis(Number(node.port), node.hostname);
    try {
      if (/role:master/.test(await redis.info('replication'))) await deleteMatching(redis, `{test-*-${process.pid}-*`);
    } finally {
      redis.disconnect();
    }
  }
}

async function clusterReady(port: number, timeoutMs = 20_000, host = '127.0.0.1'): Promise<void> {
  const redis = new Redis(port, host, { maxRetriesPerRequest: 1 });
  try {
    const deadline = Date.now() + timeoutMs;
    while (!/cluster_state:ok/.test(String(await redis.cluster('INFO')))) {
      if (Date.now() > deadline) throw new Error(`cluster node ${port} did not become ready`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    redis.disconnect();
  }
}
