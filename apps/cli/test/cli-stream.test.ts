import { type FakeOpenAIServer, TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectedAnswer, startStreamFake } from '../../../packages/queue/test/fixtures/stream-fake.ts';
import { runArcflow } from './run-arcflow.ts';

const FIXTURE = new URL('../../../packages/queue/test/fixtures/stream-agents.ts', import.meta.url).pathname;
const prefix = testPrefix('cli-stream');
const env = { ...process.env, REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix };
let worker: WorkerProcess;
let fake: FakeOpenAIServer;

beforeAll(async () => {
  fake = await startStreamFake({ delay_ms: 10 });
  worker = await spawnWorker(FIXTURE, { env: { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix, STREAM_FAKE_URL: fake.url } });
});
afterAll(async () => {
  await worker?.stop();
  await fake?.close();
  await cleanupPrefix(prefix);
});

describe('arcflow stream (SPEC §12)', () => {
  it('prints the text as it comes, the calls and the end; --json prints the chunks; --after resumes', async () => {
    const enqueued = await runArcflow(env, 'enqueue', 'stream_agent', 'from the command line');
    const run_id = enqueued.stdout.trim();
    const printed = await runArcflow(env, 'stream', run_id);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toBe(`[calls stream_lookup (call_1_1)]\n[call_1_1 completed]\n${expectedAnswer('from the command line')}\n[run completed]\n`);
    const json = await runArcflow(env, 'stream', run_id, '--json', '--after', '2');
    const chunks = json.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { offset: number; type: string });
    expect(chunks[0]?.offset).toBe(3);
    expect(chunks.at(-1)).toMatchObject({ type: 'end', status: 'completed' });
  });

  it('enqueue --stream asks the run to stream; without it a run of an agent that does not stream makes plain calls', async () => {
    const callsFor = (input: string) =>
      fake.requests
        .filter((request) => (request.body.messages as { content: unknown }[]).some((message) => message.content === input))
        .map((request) => request.body.stream === true);
    for (const [input, flags] of [
      ['streamed from the command line', ['--stream']],
      ['plain from the command line', []],
    ] as const) {
      const enqueued = await runArcflow(env, 'enqueue', 'stream_chat', input, ...flags, '--wait', '--json');
      expect(enqueued.code).toBe(0);
      expect(JSON.parse(enqueued.stdout)).toMatchObject({ status: 'completed', output: expectedAnswer(input) });
    }
    expect(callsFor('streamed from the command line')).toEqual([true]);
    expect(callsFor('plain from the command line')).toEqual([false]);
  });

  it('refuses a bad offset and an unknown run', async () => {
    expect(await runArcflow(env, 'stream', 'run_x', '--after', 'soon')).toMatchObject({ code: 1, stderr: expect.stringContaining('--after must be a whole number') });
    expect(await runArcflow(env, 'stream', 'run_missing')).toMatchObject({ code: 1, stderr: expect.stringContaining("unknown run 'run_missing'") });
  });
});
