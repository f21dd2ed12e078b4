import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { type Agent, type ModelProvider, type TraceEvent, type Workflow, silentLogger } from '@arcflow/core';
import { type ArcflowClient, type WorkerOptions, connectRedis, createClient, startWorker } from '@arcflow/queue';
import { type PrivateCluster, TEST_REDIS_URL, cleanupPrefix, scriptedProvider, testCluster, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import type { ScenarioRunner } from '@arcflow/testing/scenarios';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll } from 'vitest';

/** Fast retry and stall settings for tests. */
export const FAST = { provider_backoff_ms: 10, tool_backoff_ms: 10, lock_duration_ms: 2_000, stalled_interval_ms: 1_000 } as const;

export async function collect(client: ArcflowClient, run_id: string): Promise<TraceEvent[]> {
  const events: TraceEvent[] = [];
  for await (const event of client.events(run_id)) events.push(event);
  return events;
}

/** A scenario runner on the queue engine: fresh in-process workers (one unless told) and a client per run, under `prefix`. */
export function engineRunner(prefixFor: () => string, extra: Partial<WorkerOptions> = {}, workers = 1): ScenarioRunner {
  return async (agent: Agent | Workflow, input, { provider, exec_config, config, logger, state }) => {
    const prefix = prefixFor();
    const started = await Promise.all(
      Array.from({ length: workers }, () =>
        startWorker({
          agents: [agent],
          provider: provider ?? (scriptedProvider([]) as ModelProvider),
          redis: TEST_REDIS_URL,
          prefix,
          logger: logger ?? silentLogger,
          ...FAST,
          ...extra,
        }),
      ),
    );
    const worker = { close: () => Promise.all(started.map((each) => each.close())) };
    const client = createClient({ redis: extra.redis ?? TEST_REDIS_URL, prefix });
    try {
      const { run_id } = await client.enqueue({ agent: agent.name, input, config, exec_config, ...(state ? { state } : {}) });
      const run = await client.wait(run_id, { timeout_ms: 20_000 });
      return { ...run, events: await collect(client, run_id) };
    } finally {
      await client.close();
      await worker.close();
    }
  };
}

/**
 * Chaos for a test: SIGKILLs a random one of `live` every `periodMs` (the first after `firstMs`)
 * and starts another in its place, until `stop`, which resolves with how many it killed.
 */
export function killRepeatedly(
  live: WorkerProcess[],
  start: () => Promise<WorkerProcess>,
  { firstMs, periodMs }: { firstMs: number; periodMs: number },
): { stop(): Promise<number> } {
  let kills = 0;
  let stopping = false;
  const killing = (async () => {
    await new Promise((resolve) => setTimeout(resolve, firstMs));
    while (!stopping) {
      live.splice(Math.floor(Math.random() * live.length), 1)[0]?.kill('SIGKILL');
      kills += 1;
      live.push(await start());
      await new Promise((resolve) => setTimeout(resolve, periodMs));
    }
  })();
  return {
    async stop() {
      stopping = true;
      await killing;
      return kills;
    },
  };
}

/** Polls `check` until it holds; throws after `timeoutMs`. */
export async function until(check: () => Promise<boolean>, timeoutMs = 10_000, pollMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/**
 * What a test file opens and must clean up: its key prefixes (deleted after the file), things to
 * close after each test (in reverse order), and one Redis connection for looking underneath.
 */
export function testResources(): { prefixes: string[]; open: { close(): Promise<void> }[]; redis: Redis } {
  const prefixes: string[] = [];
  const open: { close(): Promise<void> }[] = [];
  const redis = new Redis(TEST_REDIS_URL);
  afterEach(async () => {
    for (const item of open.splice(0).reverse()) await item.close();
  });
  afterAll(async () => {
    for (const prefix of prefixes) await cleanupPrefix(prefix);
    await redis.quit();
  });
  return { prefixes, open, redis };
}

/** A test's worker processes on one fixture module, under one key prefix. */
export interface FixtureWorkers {
  readonly prefix: string;
  /** The Redis the workers use (one node, or a cluster's nodes comma-separated). */
  readonly url: string;
  /** Starts a worker process (`args`: CLI flags; `env` over the prefix's REDIS_URL and ARCFLOW_PREFIX; `readyTimeoutMs` default 30 s). */
  start(options?: { args?: string[]; env?: Record<string, string>; readyTimeoutMs?: number }): Promise<WorkerProcess>;
  /** A key the fixture writes under the prefix (`{prefix}:test:<name>`). */
  key(name: string): string;
  /** How many times the fixture counted an execution of `tool` (`{prefix}:test:exec:<tool>`). */
  executions(tool: string): Promise<number>;
  /** A connection to the workers' Redis, for reading what the fixture wrote. */
  reader(): Redis;
}

/**
 * Worker processes for a test file: `forTest(name)` gives a test its own prefix and a way to start
 * `arcflow worker` on `fixture` under it, against `redisUrl()` (read when a test starts: a cluster
 * may be started in a `beforeAll`). Every process is SIGKILLed after each test; the prefixes are
 * deleted from the test Redis after the file (a shared cluster's keys go with testCluster's close).
 * `redis` is the test Redis.
 */
export function fixtureWorkers(fixture: string, redisUrl: () => string = () => TEST_REDIS_URL): { redis: Redis; forTest(name: string): FixtureWorkers } {
  const prefixes: string[] = [];
  const workers: WorkerProcess[] = [];
  const redis = new Redis(TEST_REDIS_URL);
  const readers = new Map<string, Redis>([[TEST_REDIS_URL, redis]]);
  const readerFor = (url: string) => {
    if (!readers.has(url)) readers.set(url, connectRedis(url));
    return readers.get(url)!;
  };
  afterEach(async () => {
    for (const worker of workers.splice(0)) worker.kill('SIGKILL');
  });
  afterAll(async () => {
    for (const prefix of prefixes) await cleanupPrefix(prefix);
    for (const reader of readers.values()) await reader.quit();
  });
  return {
    redis,
    forTest(name) {
      const prefix = testPrefix(name);
      const url = redisUrl();
      prefixes.push(prefix);
      const key = (keyName: string) => `{${prefix}}:test:${keyName}`;
      return {
        prefix,
        url,
        key,
        async start({ args = [], env = {}, readyTimeoutMs } = {}) {
          const worker = await spawnWorker(fixture, { env: { REDIS_URL: url, ARCFLOW_PREFIX: prefix, ...env }, args, ...(readyTimeoutMs ? { readyTimeoutMs } : {}) });
          workers.push(worker);
          return worker;
        },
        executions: async (tool) => Number((await readerFor(url).get(key(`exec:${tool}`))) ?? 0),
        reader: () => readerFor(url),
      };
    },
  };
}

/**
 * One Redis and a 3-master Redis Cluster (the one .ci/run started, or this file's own, for the
 * file's life), for tests that run on both: each target's `url()` is read inside a test.
 */
export function redisTargets(): { name: string; url: () => string }[] {
  const cluster = fileCluster();
  return [
    { name: 'one Redis', url: () => TEST_REDIS_URL },
    { name: 'a 3-master Redis Cluster', url: cluster },
  ];
}

/** A 3-master Redis Cluster for the file's life (the one .ci/run started, or its own): its URL, read inside a test. */
export function fileCluster(): () => string {
  let cluster: PrivateCluster | undefined;
  beforeAll(async () => {
    cluster = await testCluster(3);
  }, 60_000);
  afterAll(async () => {
    await cluster?.close();
  });
  return () => cluster!.url;
}

/**
 * What BullMQ's event stream of `queue` says happened to one job (`added`, `active`, `completed`,
 * …), in order. The stream keeps them after the job is gone: the compaction of a run that ended
 * removes its finished jobs, so a test asks here rather than of the job.
 */
export async function jobEvents(redis: Redis, queue: { readonly keys: { readonly events?: string } }, jobId: string): Promise<string[]> {
  const entries = await redis.xrange(queue.keys.events!, '-', '+');
  return entries.flatMap(([, fields]) => {
    const event = new Map<string, string>();
    for (let at = 0; at + 1 < fields.length; at += 2) event.set(fields[at]!, fields[at + 1]!);
    return event.get('jobId') === jobId ? [event.get('event')!] : [];
  });
}

const REPOSITORY = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * Runs a fixture from the sources in a process of its own (tsx, with the repository's paths to the
 * workspace packages), with `env` over this process's environment; its stdout, or an error with its stderr.
 */
export function runFixture(fixture: string, args: readonly string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', fixture, ...args], {
      cwd: REPOSITORY,
      env: { ...process.env, ...env, TSX_TSCONFIG_PATH: `${REPOSITORY}tsconfig.json` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`the fixture exited with ${code}: ${err.slice(0, 4000)}`))));
  });
}
