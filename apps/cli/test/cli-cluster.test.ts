import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { type PrivateCluster, testCluster, testPrefix } from '@arcflow/testing';
import { keysFor } from '@arcflow/queue';
import { Redis } from 'ioredis';
import { ARCFLOW_BIN, type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runArcflow } from './run-arcflow.ts';

const run = promisify(execFile);
const EXAMPLE = new URL('../../../examples/weather-agent.ts', import.meta.url).pathname;
const prefix = testPrefix('cli-cluster');
let cluster: PrivateCluster;
let worker: WorkerProcess;

/** The environment of a user whose REDIS_URL lists the nodes of a 3-master Redis Cluster. */
const clusterEnv = (over: Record<string, string> = {}) => ({ ...process.env, REDIS_URL: cluster.url, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '', ...over });

const arcflow = (...args: string[]) => runArcflow(clusterEnv(), ...args);

beforeAll(async () => {
  cluster = await testCluster(3);
  worker = await spawnWorker(EXAMPLE, { env: clusterEnv() });
}, 60_000);
afterAll(async () => {
  await worker?.stop();
  await cluster?.close();
});

describe('arcflow CLI on a Redis Cluster (REDIS_URL lists its nodes)', () => {
  it('enqueues, waits and reads a partitioned run back with get, events, inspect and runs; a repeated idempotency key returns the same run', async () => {
    const enqueued = await arcflow('enqueue', 'travel_researcher', 'Trip to Oslo?', '--idempotency-key', 'cli-cluster-1', '--wait', '--json');
    expect(enqueued.code).toBe(0);
    const record = JSON.parse(enqueued.stdout);
    expect(record).toMatchObject({ status: 'completed', iterations: 3 });
    expect(record.run_id).toMatch(new RegExp(`^run_p${record.partition}_`));

    const again = await arcflow('enqueue', 'travel_researcher', 'Trip to Oslo?', '--idempotency-key', 'cli-cluster-1');
    expect(again.stdout.trim()).toBe(record.run_id);
    expect((await arcflow('get', record.run_id)).stdout).toContain('status     completed');
    const events = (await arcflow('events', record.run_id, '--json')).stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(events.at(-1)).toMatchObject({ kind: 'RunCompleted', seq: events.length });
    expect((await arcflow('inspect', record.run_id)).stdout).toContain('answered after 3 iteration(s)');
    const listed = JSON.parse((await arcflow('runs', '--json')).stdout);
    expect(listed.runs.map((each: { run_id: string }) => each.run_id)).toContain(record.run_id);
    expect((await arcflow('cancel', record.run_id)).stdout).toContain('had already ended (completed)');
  });

  it('runs the demo end to end', async () => {
    const demo = await run(process.execPath, [ARCFLOW_BIN, 'demo', '--runs', '4'], { env: clusterEnv({ ARCFLOW_PREFIX: testPrefix('cli-cluster-demo') }), timeout: 90_000 });
    expect(demo.stdout).toContain('arcflow demo — Redis: REDIS_URL');
    expect(demo.stdout).toMatch(/runs\s+8 \(8 completed, 0 not; 4 of them workflows\)/);
    expect(demo.stdout).toMatch(/inspect run_p\d+_/);
  }, 120_000);

  it('refuses, with one clear line, a REDIS_URL naming one node of the cluster that does not hold the prefix', async () => {
    const single = testPrefix('cli-cluster-single');
    const port = await nodeWithout(keysFor(single).partitions);
    const env = clusterEnv({ REDIS_URL: `redis://127.0.0.1:${port}`, ARCFLOW_PREFIX: single });
    const expected = new RegExp(
      `^arcflow: the Redis at redis://127\\.0\\.0\\.1:${port} is one node of a Redis Cluster \\(it answered MOVED \\d+ [\\d.:]+\\); for cluster mode, list several of its nodes, comma-separated: redis://host1:6379,redis://host2:6379\n$`,
    );
    for (const args of [['worker', '--module', EXAMPLE], ['enqueue', 'travel_researcher', 'hi'], ['runs'], ['get', 'run_x'], ['serve', '--port', '0'], ['demo', '--runs', '1']]) {
      const refused = await runArcflow(env, ...args);
      expect({ args, code: refused.code, stderr: refused.stderr }).toMatchObject({ code: 1, stderr: expect.stringMatching(expected) });
    }
  }, 90_000);
});

/** The port of a master that does not hold `key`'s slot (it answers MOVED). */
async function nodeWithout(key: string): Promise<number> {
  for (const port of cluster.ports) {
    const node = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 });
    try {
      await node.exists(key);
    } catch (error) {
      if (/^MOVED /.test((error as Error).message)) return port;
    } finally {
      node.disconnect();
    }
  }
  throw new Error(`every node holds ${key}`);
}
