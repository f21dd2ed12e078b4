import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { RunStore } from '../src/runs/run-store.ts';
import { runFixture } from './harness.ts';

// `arcflow get`, `runs`, `events` and `cancel` start in about the time of a Redis client: the
// client's entry loads neither BullMQ nor the schema validator, and reading a run (or cancelling
// one with no queued calls) loads neither the OpenTelemetry API nor BullMQ. Checked in a process
// of its own, whose every resolved module is recorded (this test process has loaded them all).
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

/** Runs the fixture from the sources: what it reports. */
async function readInChild(...run_ids: string[]): Promise<Report> {
  return JSON.parse(await runFixture(FIXTURE, run_ids, { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix })) as Report;
}

/** The npm packages among the resolved modules, by name. */
function packagesOf(urls: readonly string[]): Set<string> {
  return new Set(urls.flatMap((url) => [...(/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.slice(1, 2) ?? [])]));
}

describe('the client entry, @arcflow/queue/client', () => {
  it('gets, lists, reads events and cancels without loading BullMQ, ajv, jose or the OpenTelemetry API (nor msgpack to read)', async () => {
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
      events: { error: 'unknown_run' },
      cancelUnknown: { error: 'unknown_run' },
      cancel: { cancelled: true, status: 'cancelled' },
    });
    // The hook saw the modules: the client's Redis client and its own sources.
    expect(packagesOf(loadedByReads)).toContain('ioredis');
    expect(loadedByReads.some((url) => url.endsWith('/packages/queue/src/client/client.ts'))).toBe(true);
    const heavy = (urls: readonly string[], pattern: RegExp) => [...packagesOf(urls)].filter((name) => pattern.test(name));
    expect(heavy(loadedByReads, /^(bullmq|msgpackr|ajv|ajv-formats|jose|@opentelemetry\/.*)$/)).toEqual([]);
    // Ending a run writes through a script with a msgpack map; a run with no queued calls has no BullMQ job to remove.
    expect(heavy(loaded, /^(bullmq|ajv|ajv-formats|@opentelemetry\/.*)$/)).toEqual([]);
    expect(
      loaded.filter((url) =>
        /\/packages\/queue\/src\/(worker\/[a-z-]+|loop\/(join|round|provider-job|resolve-step|step-context|ready-state|call-model|model-router|act|end-step)|calls\/waiting\/approvals|workflows\/workflow-scheduler|client\/enqueue|tracing)\.ts$/.test(
          url,
        ),
      ),
    ).toEqual([]);
  });
});
