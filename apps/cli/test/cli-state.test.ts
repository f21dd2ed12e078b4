import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runArcflow } from './run-arcflow.ts';

const FIXTURE = new URL('./fixtures/state-agents.ts', import.meta.url).pathname;
const prefix = testPrefix('cli-state');
const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };
let worker: WorkerProcess;

const arcflow = (...args: string[]) => runArcflow({ ...process.env, ...env }, ...args);
const runCount = async () => JSON.parse((await arcflow('runs', '--json', '--limit', '500')).stdout).runs.length as number;

beforeAll(async () => {
  worker = await spawnWorker(FIXTURE, { env });
});
afterAll(async () => {
  await worker?.stop();
  await cleanupPrefix(prefix);
});

describe('run state from the CLI (SPEC §17)', () => {
  it('enqueues with --state; get shows the state the last round left (text and --json); events name keys only', async () => {
    const initial = { facts: ['Bergen'], trip: { days: 3 } };
    const enqueued = await arcflow('enqueue', 'state_agent', 'Oslo', '--state', JSON.stringify(initial), '--wait', '--json');
    expect(enqueued.code).toBe(0);
    const record = JSON.parse(enqueued.stdout);
    expect(record).toMatchObject({ status: 'completed', output: 'noted Oslo', state: { facts: ['Bergen', 'Oslo'], trip: { days: 3 } } });

    const got = await arcflow('get', record.run_id);
    expect(got.code).toBe(0);
    expect(got.stdout).toContain('state      facts: ["Bergen","Oslo"]\n           trip: {"days":3}\n');
    const json = await arcflow('get', record.run_id, '--json');
    expect(JSON.parse(json.stdout).state).toEqual({ facts: ['Bergen', 'Oslo'], trip: { days: 3 } });

    const events = (await arcflow('events', record.run_id, '--json')).stdout.trim().split('\n');
    const updated = events.map((line) => JSON.parse(line)).filter((event) => event.kind === 'StateUpdated');
    expect(updated).toEqual([expect.objectContaining({ iteration: 1, keys: ['facts'], state_size_bytes: JSON.stringify(record.state).length })]);
    // Events hold key names and a size, never values.
    expect(events.join('\n')).not.toContain('Bergen');

    // No --state: the run starts from {}, and get says so.
    const plain = await arcflow('enqueue', 'state_agent', 'Lima', '--wait', '--json');
    expect(JSON.parse(plain.stdout).state).toEqual({ facts: ['Lima'] });
    const none = JSON.parse((await arcflow('enqueue', 'state_agent', 'x', '--json')).stdout).run_id as string;
    expect((await arcflow('get', none, '--json')).stdout).toContain('"state":{');
  });

  it('refuses a --state that is not JSON, not an object or over max_state_bytes in one line naming it, with nothing queued', async () => {
    const before = await runCount();
    const notJson = await arcflow('enqueue', 'state_agent', 'hi', '--state', '{facts:');
    expect(notJson).toMatchObject({ code: 1, stdout: '' });
    expect(notJson.stderr).toMatch(/^arcflow: --state is not valid JSON: [^\n]+\n$/);
    for (const [sent, got] of [
      ['[1,2]', 'an array'],
      ['"facts"', 'string'],
      ['null', 'null'],
      ['3', 'number'],
    ]) {
      const refused = await arcflow('enqueue', 'state_agent', 'hi', '--state', sent!);
      expect(refused).toMatchObject({ code: 1, stdout: '' });
      expect(refused.stderr).toBe(`arcflow: --state must be a JSON object (the run's initial state), got ${got}\n`);
    }
    // The agent's max_state_bytes is 200.
    const big = await arcflow('enqueue', 'state_agent', 'hi', '--state', JSON.stringify({ blob: 'x'.repeat(300) }));
    expect(big).toMatchObject({ code: 1, stdout: '' });
    expect(big.stderr).toBe("arcflow: state is 311 bytes of JSON, over the agent's max_state_bytes (200)\n");
    // A misspelt flag is a usage error, not a run without its state.
    const misspelt = await arcflow('enqueue', 'state_agent', 'hi', '--sate', '{}');
    expect(misspelt.code).toBe(2);
    expect(misspelt.stderr).toContain("unknown option '--sate'; did you mean '--state'?");
    expect(await runCount()).toBe(before);
  });

  it('lists --state in the help text', async () => {
    const help = await arcflow('help');
    expect(help.stdout).toContain('[--state JSON]');
    expect(help.stdout).toContain("--state: the run's initial state, a JSON object");
  });
});
