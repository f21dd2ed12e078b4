import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runArcflow } from './run-arcflow.ts';

// SPEC §15 from the CLI: `arcflow fork` prints the new run's id, and `arcflow runs retry|cancel`
// act on a filter (with --dry-run changing nothing).

const FIXTURE = new URL('./fixtures/state-agents.ts', import.meta.url).pathname;
const prefix = testPrefix('cli-fork');
const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
let worker: WorkerProcess;

const arcflow = (...args: string[]) => runArcflow({ ...process.env, ...env }, ...args);

beforeAll(async () => {
  worker = await spawnWorker(FIXTURE, { env });
});
afterAll(async () => {
  await worker?.stop();
  await cleanupPrefix(prefix);
});

describe('fork and bulk actions from the CLI (SPEC §15)', () => {
  it('forks from an iteration (the id, or --json), refuses a bad one in one line, and runs retry|cancel over a filter', async () => {
    const source = JSON.parse((await arcflow('enqueue', 'state_agent', 'Oslo', '--state', '{"facts":["Bergen"]}', '--wait', '--json')).stdout);
    expect(source).toMatchObject({ status: 'completed', iterations: 2, state: { facts: ['Bergen', 'Oslo'] } });

    const forked = await arcflow('fork', source.run_id, '--from-iteration', '2');
    expect(forked).toMatchObject({ code: 0, stderr: '' });
    const run_id = forked.stdout.trim();
    expect(run_id).toMatch(/^run_/);
    const got = JSON.parse((await arcflow('get', run_id, '--json')).stdout);
    expect(got.forked_from).toEqual({ run_id: source.run_id, step_id: 's1', iteration: 2 });
    expect((await arcflow('get', run_id)).stdout).toContain(`\nforked     from ${source.run_id}, step s1, iteration 2\n`);
    // Its tree shows the live call only; the replayed round has no events of its own.
    const tree = await arcflow('inspect', run_id);
    expect(tree).toMatchObject({ code: 0, stderr: '' });
    const json = await arcflow('fork', source.run_id, '--from-iteration', '1', '--json');
    expect(Object.keys(JSON.parse(json.stdout))).toEqual(['run_id']);

    // A thread's run forks onto a new thread: standard output is still the run id alone.
    const onThread = JSON.parse((await arcflow('enqueue', 'state_agent', 'Rome', '--thread', `${prefix}-th`, '--wait', '--json')).stdout);
    const threadFork = await arcflow('fork', onThread.run_id, '--from-iteration', '1');
    expect(threadFork.code).toBe(0);
    expect(threadFork.stdout).toMatch(/^run_[\w-]+\n$/);
    expect(threadFork.stderr).toMatch(/^the fork is on a new thread: \S+\n$/);

    const bad = await arcflow('fork', source.run_id, '--from-iteration', '3');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe(`arcflow: from.iteration: expected an integer from 1 to 2 (the last iteration of ${source.run_id}/s1), got 3\n`);
    expect((await arcflow('fork', source.run_id)).stderr).toContain('--from-iteration');

    // A workflow run's step re-runs from iteration 1 when no iteration is given.
    const flowRun = JSON.parse((await arcflow('enqueue', 'state_flow', 'Paris', '--wait', '--json')).stdout);
    expect(flowRun).toMatchObject({ status: 'completed' });
    const stepFork = await arcflow('fork', flowRun.run_id, '--step', 'then');
    expect(stepFork).toMatchObject({ code: 0, stderr: '' });
    const stepForked = JSON.parse((await arcflow('get', stepFork.stdout.trim(), '--json')).stdout);
    expect(stepForked.forked_from).toEqual({ run_id: flowRun.run_id, step_id: 'then', iteration: 1 });

    // Completed runs: a retry matches them and retries none; a cancel of ended runs does nothing.
    const dry = JSON.parse((await arcflow('runs', 'retry', '--status', 'completed', '--agent', 'state_agent', '--dry-run', '--json')).stdout);
    expect(dry).toEqual({ matched: expect.any(Number), acted: 0, run_ids: [] });
    expect(dry.matched).toBeGreaterThanOrEqual(1);
    const cancelled = await arcflow('runs', 'cancel', '--status', 'completed', '--since', new Date(0).toISOString());
    expect(cancelled.stdout).toMatch(/^matched [1-9]\d*; cancelled 0\n$/);
    expect((await arcflow('runs', 'retry')).stderr).toContain('--status');
  });
});
