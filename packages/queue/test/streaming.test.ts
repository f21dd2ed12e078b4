import { Agent, type StreamChunk, StreamReassembler, silentLogger, tool } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { type ArcflowClient, createClient, keysFor, startWorker } from '@arcflow/queue';
import { type FakeOpenAIOptions, type FakeTurn, TEST_REDIS_URL, startFakeOpenAI, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { FAST, testResources, until } from './harness.ts';

const { prefixes, open, redis } = testResources();

const lookup = tool({
  name: 'lookup',
  description: 'looks a city up',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  handler: ({ city }: { city: string }) => `${city}: 18°C`,
});
const agent = new Agent({ name: 'streamer', tools: [lookup], stream: true });

/** A worker on a fake server that streams as told, and a client, under a fresh prefix. */
async function setup(name: string, turns: FakeTurn[], options: Omit<FakeOpenAIOptions, 'turns'> = {}) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  const server = await startFakeOpenAI({ turns, ...options });
  open.push(server);
  const provider = openaiProvider({ base_url: server.url, api_key: 'k', timeout_ms: 10_000 });
  const worker = await startWorker({ agents: [agent], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
  open.push(worker);
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  return { server, client };
}

async function readAll(client: ArcflowClient, run_id: string, after = 0): Promise<StreamChunk[]> {
  const chunks: StreamChunk[] = [];
  for await (const chunk of client.stream(run_id, { after })) chunks.push(chunk);
  return chunks;
}

function textOf(chunks: readonly StreamChunk[]): string[] {
  const reassembler = new StreamReassembler();
  for (const chunk of chunks) reassembler.add(chunk);
  return reassembler.texts().map((entry) => entry.text);
}

const expectGapFree = (chunks: readonly StreamChunk[]) => expect(chunks.map((chunk) => chunk.offset)).toEqual(chunks.map((_, index) => index + 1));
const LONG = 'The weather in Oslo is mild today, with a light breeze from the fjord and a little sun in the afternoon. '.repeat(3);

describe('the run stream (SPEC §12), in-process worker and a streaming fake server', () => {
  it('gets text to client.stream while the provider call is still going, and ends with the run', async () => {
    const { client } = await setup('early', [{ type: 'text', content: LONG }], { stream: { chunk_chars: 6, delay_ms: 15 } });
    const { run_id } = await client.enqueue({ agent: 'streamer', input: 'Weather?' });
    const arrivals: { chunk: StreamChunk; at: number }[] = [];
    for await (const chunk of client.stream(run_id)) arrivals.push({ chunk, at: Date.now() });
    const run = await client.wait(run_id);
    const events = [];
    for await (const event of client.events(run_id)) events.push(event);
    const received = events.find((event) => event.kind === 'ProviderResponseReceived')!;
    const firstText = arrivals.find(({ chunk }) => chunk.type === 'text')!;
    // The call takes ~50 chunks × 15 ms; its first text reached the reader long before it ended.
    expect(firstText.at).toBeLessThan(received.ts - 300);
    const chunks = arrivals.map(({ chunk }) => chunk);
    expectGapFree(chunks);
    expect(chunks.at(-1)).toEqual({ offset: chunks.length, type: 'end', status: 'completed' });
    expect(textOf(chunks)).toEqual([run.output]);
    expect(run.output).toBe(LONG);
    // Batched: at most one write per 50 ms of a ~750 ms call, and one at its end.
    expect(chunks.filter((chunk) => chunk.type === 'text').length).toBeLessThanOrEqual(Math.ceil((received.ts - firstText.at) / 50) + 3);
    // Trace events never hold text.
    expect(JSON.stringify(events)).not.toContain('fjord');
  });

  it('streams tool calls and their results, and a reader that reconnects every k chunks reassembles each iteration', async () => {
    const { client } = await setup(
      'reconnect',
      [
        {
          type: 'tools',
          calls: [
            { id: 'call_1', name: 'lookup', arguments: { city: 'Oslo' } },
            { id: 'call_2', name: 'nowhere', arguments: {} },
          ],
        },
        { type: 'text', content: LONG },
      ],
      { stream: { chunk_chars: 5, delay_ms: 3 } },
    );
    const { run_id } = await client.enqueue({ agent: 'streamer', input: 'Weather?' });
    const k = 1 + Math.floor(Math.random() * 3);
    const chunks: StreamChunk[] = [];
    while (chunks.at(-1)?.type !== 'end') {
      let read = 0;
      for await (const chunk of client.stream(run_id, { after: chunks.at(-1)?.offset ?? 0 })) {
        chunks.push(chunk);
        read += 1;
        if (read === k) break;
      }
    }
    const run = await client.wait(run_id);
    expectGapFree(chunks);
    expect(textOf(chunks)).toEqual([LONG]);
    expect(run.output).toBe(LONG);
    expect(chunks.filter((chunk) => chunk.type === 'tool_call')).toMatchObject([
      { iteration: 1, tool_call_id: 'call_1', tool_name: 'lookup' },
      { iteration: 1, tool_call_id: 'call_2', tool_name: 'nowhere' },
    ]);
    // Results come as calls end, in whatever order that is.
    const results = chunks.filter((chunk) => chunk.type === 'tool_result');
    expect(results.sort((a, b) => a.tool_call_id.localeCompare(b.tool_call_id))).toMatchObject([
      { iteration: 1, tool_call_id: 'call_1', status: 'completed' },
      { iteration: 1, tool_call_id: 'call_2', status: 'failed' },
    ]);
    const lastCall = Math.max(...chunks.filter((chunk) => chunk.type === 'tool_call').map((chunk) => chunk.offset));
    expect(results.every((chunk) => chunk.offset > lastCall)).toBe(true);
  });

  it.each(['cut', 'bad_chunk', 'no_finish'] as const)('retries a %s stream and resets the text it had streamed', async (fault) => {
    const { client } = await setup(
      `fault-${fault}`,
      [
        { type: 'text', content: `${LONG} (lost)`, stream_fault: fault },
        { type: 'text', content: LONG },
      ],
      {
        stream: { chunk_chars: 8, delay_ms: 2 },
      },
    );
    const { run_id } = await client.enqueue({ agent: 'streamer', input: 'Weather?' });
    const run = await client.wait(run_id, { timeout_ms: 10_000 });
    const chunks = await readAll(client, run_id);
    expect(run.status).toBe('completed');
    expectGapFree(chunks);
    expect(chunks.some((chunk) => chunk.type === 'reset')).toBe(true);
    expect(textOf(chunks)).toEqual([LONG]);
  });

  it('works with a server that answers a streaming request with a whole JSON response', async () => {
    const { client } = await setup('plain', [{ type: 'text', content: LONG }], { never_stream: true });
    const { run_id } = await client.enqueue({ agent: 'streamer', input: 'Weather?' });
    const chunks = await readAll(client, run_id);
    expect(chunks).toMatchObject([
      { offset: 1, type: 'text', step_id: 's1', iteration: 1, attempt: 1, delta: LONG },
      { offset: 2, type: 'end', status: 'completed' },
    ]);
    // An async iterator, as well as iterable: read by next() until done.
    const iterator = client.stream(run_id, { after: 1 });
    expect(await iterator.next()).toMatchObject({ done: false, value: { offset: 2, type: 'end' } });
    expect(await iterator.next()).toEqual({ done: true, value: undefined });
  });

  it('keeps the text streamed so far in the stream and the output of a cancelled run', async () => {
    const { client } = await setup('cancel', [{ type: 'text', content: LONG.repeat(3) }], { stream: { chunk_chars: 4, delay_ms: 20 } });
    const { run_id } = await client.enqueue({ agent: 'streamer', input: 'Weather?' });
    const chunks: StreamChunk[] = [];
    for await (const chunk of client.stream(run_id)) {
      chunks.push(chunk);
      if (chunks.filter((each) => each.type === 'text').length === 3) await client.cancel(run_id);
    }
    const run = await client.get(run_id);
    expect(run?.status).toBe('cancelled');
    expectGapFree(chunks);
    expect(chunks.at(-1)).toMatchObject({ type: 'end', status: 'cancelled' });
    const [partial] = textOf(chunks);
    expect(partial!.length).toBeGreaterThan(0);
    expect(LONG.repeat(3).startsWith(partial!)).toBe(true);
    expect(run?.output).toBe(partial);
    // Nothing is written after the end, even by the call that was still streaming.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await readAll(client, run_id, chunks.length)).toEqual([]);
  });

  it('refuses a bad offset and an unknown run clearly', async () => {
    const { client } = await setup('refusals', []);
    expect(() => client.stream('nope', { after: -1 })).toThrow(/after must be a whole number/);
    await expect(readAll(client, 'no_such_run')).rejects.toThrow(/unknown run 'no_such_run'/);
  });
});

describe('the run stream, in Redis', () => {
  it('lives beside the run, in its slot, and expires with it', async () => {
    const { client } = await setup('retention', [{ type: 'text', content: 'short' }]);
    const { run_id } = await client.enqueue({ agent: 'streamer', input: 'hi' });
    await client.wait(run_id);
    const record = keysFor(prefixes.at(-1)!).run(run_id);
    expect(record.stream.startsWith(record.record)).toBe(true);
    // Compacted after the run's end (docs/decisions/0031-compaction.md), the stream is in the run's archive.
    await until(async () => (await redis.hget(record.record, 'archived')) !== null);
    expect(record.archive.startsWith(record.record)).toBe(true);
    const [recordTtl, archiveTtl] = await Promise.all([redis.ttl(record.record), redis.ttl(record.archive)]);
    expect(recordTtl).toBeGreaterThan(0);
    expect(Math.abs(archiveTtl - recordTtl)).toBeLessThanOrEqual(1);
    expect(await redis.exists(record.stream)).toBe(0);
    const chunks = [];
    for await (const chunk of client.stream(run_id)) chunks.push(chunk);
    expect(chunks.map((chunk) => chunk.type)).toEqual(['text', 'end']);
  });
});
