import { type StreamChunk, StreamReassembler } from '@arcflow/core';
import { createClient } from '@arcflow/queue';
import { describe, expect, it } from 'vitest';
import { runStreamChaos } from './chaos/stream-chaos.ts';
import { expectedAnswer, startStreamFake } from './fixtures/stream-fake.ts';
import { fixtureWorkers } from './harness.ts';

const FIXTURE = new URL('./fixtures/stream-agents.ts', import.meta.url).pathname;
const { forTest } = fixtureWorkers(FIXTURE);

describe('the run stream across worker crashes (SPEC §12), real worker processes', () => {
  it('a worker SIGKILLed mid-stream: the call made again begins with a reset, and the text read equals the output', async () => {
    const fake = await startStreamFake({ delay_ms: 40 });
    const { prefix, start } = forTest('stream-kill');
    const client = createClient({ redis: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', prefix });
    try {
      const first = await start({ env: { STREAM_FAKE_URL: fake.url } });
      const { run_id } = await client.enqueue({ agent: 'stream_agent', input: 'killed mid-stream' });
      const chunks: StreamChunk[] = [];
      for await (const chunk of client.stream(run_id)) {
        chunks.push(chunk);
        if (chunk.type === 'text') break;
      }
      first.kill('SIGKILL');
      await first.exited;
      await start({ env: { STREAM_FAKE_URL: fake.url } });
      for await (const chunk of client.stream(run_id, { after: chunks.at(-1)!.offset })) chunks.push(chunk);
      const run = await client.get(run_id);
      expect(run?.status).toBe('completed');
      expect(chunks.map((chunk) => chunk.offset)).toEqual(chunks.map((_, index) => index + 1));
      const reset = chunks.find((chunk) => chunk.type === 'reset');
      expect(reset).toMatchObject({ step_id: 's1', iteration: 2 });
      expect((reset as { attempt: number }).attempt).toBeGreaterThan((chunks.find((chunk) => chunk.type === 'text') as { attempt: number }).attempt);
      const reassembler = new StreamReassembler();
      for (const chunk of chunks) reassembler.add(chunk);
      expect(reassembler.texts().map((entry) => entry.text)).toEqual([run?.output]);
      expect(run?.output).toBe(expectedAnswer('killed mid-stream'));
    } finally {
      await client.close();
      await fake.close();
    }
  }, 60_000);

  it('chaos, short (`npm run chaos -- --streams` runs 200): 10 runs, workers killed while they stream, 0 gaps, 0 duplicates, every text equal to its output', async () => {
    // A kill every 2.5 s, whatever a worker takes to start; its workers allow five stalls a job (see stream-chaos.ts).
    const report = await runStreamChaos({ runs: 10, workers: 2, killEveryMs: 2_500, timeoutMs: 90_000, chunkDelayMs: 25 });
    expect(report.violations, report.violations.join('\n')).toEqual([]);
    expect(report).toMatchObject({ runs: 10, completed: 10, gaps: 0, duplicates: 0 });
    expect(report.workerKills).toBeGreaterThanOrEqual(1);
  }, 150_000);
});
