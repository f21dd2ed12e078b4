import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { RunStore } from '../src/runs/run-store.ts';

// `arcflow get`, `runs`, `events` and `cancel` start in about the time of a Redis client: the
// client's entry loads neither BullMQ nor the schema validator, and reading a run (or cancelling
// one with no queued calls) loads neither the OpenTelemetry API nor BullMQ. Checked in a process
// of its own, whose every resolved module is recorded (this test process has loaded them all).
const REPOSITORY = fileURLToPath(new URL('../../../', import.meta.url));
const FIXTURE = fileURLToPath(new URL('./fixtures/read-runs.ts', import.meta.url));
const prefix = testPrefix('light-client');
const redis = new Redis(TEST_REDIS_URL);

afterAll(async () => {
  await cleanupPrefix(prefix);
  await redis.quit();
});

interface Report {
  readonly answers: Record<string, unknown>;
  /** The modules resolved once the client has read runs (and cancelled an unknown one). */
  readonly loadedByReads: readonly string[];
  /** The modules resolved once it has also cancelled a queued run. */
  readonly loaded: readonly string[];
}

/** Runs the fixture from the sources (tsx, with the repository's paths to the workspace packages). */
function readInChild(...run_ids: string[]): Promise<Report> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, ...run_ids], {
      cwd: REPOSITORY,
      env: { ...process.env, REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, TSX_TSCONFIG_PATH: `${REPOSITORY}tsconfig.json` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`the fixture exited with ${code}: ${err}`));
      else resolve(JSON.parse(out) as Report);
    });
  });
}

/** The npm packages among the resolved modules, by name. */
function packagesOf(urls: readonly string[]): Set<string> {
  return new Set(urls.flatMap((url) => [...(/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.slice(1, 2) ?? [])]));
}

describe('the client entry, @arcflow/queue/client', () => {
  it('gets, lists, reads events and cancels without loading BullMQ, ajv or the OpenTelemetry API (nor msgpack to read)', async () => {
    const store = new RunStore(redis, prefix, 60);
    const queued = 'run_light-queued';
    await store.createRun({ run_id: queued, agent: 'a', input: 'hi', config: null, exec_config: null, trace: {}, definition_hash: '' }, undefined, {
      kind: 'RunEnqueued',
      step_id: 's1',
      agent: 'a',
    });

    const { answers, loadedByReads, loaded } = await readInChild('run_light-unknown', queued);

    expect(answers).toEqual({
      get: null,
      list: [queued],
      events: 0,
      cancelUnknown: { error: 'unknown_run' },
      cancel: { cancelled: true, status: 'cancelled' },
    });
    // The hook saw the modules: the client's Redis client and its own sources.
    expect(packagesOf(loadedByReads)).toContain('ioredis');
    expect(loadedByReads.some((url) => url.endsWith('/packages/queue/src/client/client.ts'))).toBe(true);
    const heavy = (urls: readonly string[], pattern: RegExp) => [...packagesOf(urls)].filter((name) => pattern.test(name));
    expect(heavy(loadedByReads, /^(bullmq|msgpackr|ajv|ajv-formats|@opentelemetry\/.*)$/)).toEqual([]);
    // Ending a run writes through a script with a msgpack map; a run with no queued calls has no BullMQ job to remove.
    expect(heavy(loaded, /^(bullmq|ajv|ajv-formats|@opentelemetry\/.*)$/)).toEqual([]);
    expect(
      loaded.filter((url) =>
        /\/packages\/queue\/src\/(worker\/worker|loop\/(join|provider-job)|calls\/waiting\/approvals|workflows\/workflow-scheduler|client\/enqueue|tracing)\.ts$/.test(url),
      ),
    ).toEqual([]);
  });
});
