import { type StreamChunk, StreamReassembler } from '@arcflow/core';
import { createClient } from '@arcflow/queue';
import type { FakeRequest } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { expectedAnswer, startStreamFake } from './fixtures/stream-fake.ts';
import { fixtureWorkers } from './harness.ts';

const FIXTURE = new URL('./fixtures/stream-agents.ts', import.meta.url).pathname;
const { forTest } = fixtureWorkers(FIXTURE);

/** The requests of the run whose input was `input` (the fake's answers depend on the conversation). */
const requestsOf = (requests: readonly FakeRequest[], input: string) =>
  requests.filter((request) => (request.body.messages as { role: string; content: unknown }[]).some((message) => message.role === 'user' && message.content === input));

describe('a server that cannot stream (SPEC §12), real worker processes', () => {
  it('answers 500 to streamed requests holding tool calls: runs complete, the next run makes no streamed request, and the worker says so once', async () => {
    const fake = await startStreamFake({ cannot_stream: 'tool_calls' });
    const { prefix, start } = forTest('cannot-stream');
    const client = createClient({ redis: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', prefix });
    try {
      const worker = await start({ env: { STREAM_FAKE_URL: fake.url } });
      const inputs = ['first run', 'second run'];
      const outputs: (string | undefined)[] = [];
      const streams: StreamChunk[][] = [];
      for (const input of inputs) {
        // `stream_agent` streams by default.
        const { run_id } = await client.enqueue({ agent: 'stream_agent', input });
        const chunks: StreamChunk[] = [];
        for await (const chunk of client.stream(run_id)) chunks.push(chunk);
        const run = await client.wait(run_id, { timeout_ms: 20_000 });
        expect(run).toMatchObject({ status: 'completed', iterations: 2 });
        outputs.push(run.output);
        streams.push(chunks);
      }
      expect(outputs).toEqual(inputs.map((input) => expectedAnswer(input)));
      // The first run's first request streamed and was refused, then asked again at once without streaming; nothing streams after.
      expect(requestsOf(fake.requests, 'first run').map((request) => request.body.stream === true)).toEqual([true, false, false]);
      expect(requestsOf(fake.requests, 'second run').map((request) => request.body.stream === true)).toEqual([false, false]);
      // Their streams still give each iteration's text whole, then end.
      for (const [index, chunks] of streams.entries()) {
        expect(chunks.map((chunk) => chunk.offset)).toEqual(chunks.map((_, at) => at + 1));
        expect(chunks.map((chunk) => chunk.type)).toEqual(['tool_call', 'tool_result', 'text', 'end']);
        const texts = new StreamReassembler();
        for (const chunk of chunks) texts.add(chunk);
        expect(texts.texts().map((entry) => entry.text)).toEqual([outputs[index]]);
      }
      const warnings = worker
        .stderr()
        .split('\n')
        .filter((line) => line.includes('"level":"warn"') && line.includes('without streaming'));
      expect(warnings).toHaveLength(1);
      expect(JSON.parse(warnings[0]!)).toMatchObject({ component: 'provider-openai', status: 500, plain_for_ms: 600_000 });
    } finally {
      await client.close();
      await fake.close();
    }
  }, 60_000);
});
