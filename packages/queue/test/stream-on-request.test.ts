import { Agent, type StreamChunk, StreamReassembler, agentTool, silentLogger, tool } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { type ArcflowClient, createClient, startWorker } from '@arcflow/queue';
import { type FakeOpenAIServer, type FakeRequest, type FakeTurn, TEST_REDIS_URL, startFakeOpenAI, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { FAST, testResources } from './harness.ts';

const { prefixes, open } = testResources();

const lookup = tool({
  name: 'lookup',
  description: 'looks a city up',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  handler: ({ city }: { city: string }) => `${city}: 18°C`,
});
/** Streams only when its run asks. */
const quiet = new Agent({ name: 'quiet', model: 'quiet-model', tools: [lookup] });
/** Streams unless its run says not to. */
const loud = new Agent({ name: 'loud', model: 'loud-model', stream: true });
/** A child that would stream by default; it follows its parent instead. */
const helper = new Agent({ name: 'helper', model: 'child-model', stream: true });
const parent = new Agent({ name: 'parent', model: 'parent-model', tools: [agentTool(helper)] });

const ANSWER = 'Mild in Oslo, with a light breeze from the fjord and a little sun in the afternoon.';

/** One round of `lookup` (quiet) or of the helper (parent) when offered and the user spoke last, then the answer. */
function answerFor(request: FakeRequest): FakeTurn {
  const messages = (request.body.messages ?? []) as { role: string }[];
  const offered = ((request.body.tools ?? []) as { function: { name: string } }[]).map((spec) => spec.function.name);
  if (messages.at(-1)?.role === 'user' && offered.includes('lookup')) return { type: 'tools', calls: [{ name: 'lookup', arguments: { city: 'Oslo' } }] };
  if (messages.at(-1)?.role === 'user' && offered.includes('helper')) return { type: 'tools', calls: [{ name: 'helper', arguments: { input: 'Oslo?' } }] };
  return { type: 'text', content: request.body.model === 'child-model' ? 'Oslo: mild.' : ANSWER };
}

async function setup(name: string, options: { turns?: FakeTurn[] } = {}): Promise<{ server: FakeOpenAIServer; client: ArcflowClient }> {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  const server = await startFakeOpenAI({ turns: options.turns ?? [], fallback: answerFor, stream: { chunk_chars: 6 } });
  open.push(server);
  const provider = openaiProvider({ base_url: server.url, api_key: 'k', timeout_ms: 10_000, logger: silentLogger });
  const worker = await startWorker({ agents: [quiet, loud, parent, helper], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
  open.push(worker);
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  return { server, client };
}

async function readAll(client: ArcflowClient, run_id: string): Promise<StreamChunk[]> {
  const chunks: StreamChunk[] = [];
  for await (const chunk of client.stream(run_id)) chunks.push(chunk);
  return chunks;
}

/** Whether each request of `model` asked to stream. */
const streamedBy = (server: FakeOpenAIServer, model: string) => server.requests.filter((request) => request.body.model === model).map((request) => request.body.stream === true);

describe('streaming on request (SPEC §12), in-process worker and the fake server', () => {
  it('a run not asked to stream makes plain calls, and client.stream still gives each iteration its text, whole, then end', async () => {
    const { server, client } = await setup('not-asked');
    const { run_id } = await client.enqueue({ agent: 'quiet', input: 'Weather?' });
    const chunks = await readAll(client, run_id);
    const run = await client.wait(run_id);
    expect(run).toMatchObject({ status: 'completed', output: ANSWER });
    expect(streamedBy(server, 'quiet-model')).toEqual([false, false]);
    expect(server.requests.every((request) => request.body.stream_options === undefined)).toBe(true);
    expect(chunks.map((chunk) => chunk.type)).toEqual(['tool_call', 'tool_result', 'text', 'end']);
    expect(chunks.find((chunk) => chunk.type === 'text')).toMatchObject({ offset: 3, step_id: 's1', iteration: 2, attempt: 1, delta: ANSWER });
    expect(chunks.at(-1)).toEqual({ offset: 4, type: 'end', status: 'completed' });
  });

  it('ends each call the loop does not execute on the stream too: a failed tool_result after its tool_call (max_iterations)', async () => {
    const { client } = await setup('not-executed');
    const { run_id } = await client.enqueue({ agent: 'quiet', input: 'Weather?', config: { tool_execution: { max_iterations: 1 } } });
    const chunks = await readAll(client, run_id);
    expect((await client.wait(run_id)).status).toBe('failed');
    expect(chunks.map((chunk) => chunk.type)).toEqual(['tool_call', 'tool_result', 'end']);
    const [called, ended] = chunks as [Extract<StreamChunk, { type: 'tool_call' }>, Extract<StreamChunk, { type: 'tool_result' }>];
    expect(ended).toMatchObject({ step_id: 's1', iteration: 1, tool_call_id: called.tool_call_id, status: 'failed' });
  });

  it('stream: true at enqueue streams a run of an agent that does not by default, and stream: false turns an agent default off', async () => {
    const { server, client } = await setup('asked');
    const asked = await client.enqueue({ agent: 'quiet', input: 'Weather?', stream: true });
    const chunks = await readAll(client, asked.run_id);
    expect(streamedBy(server, 'quiet-model')).toEqual([true, true]);
    // Streamed in pieces as the model wrote them (6 characters a chunk from the fake), which the reader puts together.
    expect(chunks.filter((chunk) => chunk.type === 'text').length).toBeGreaterThan(1);
    const texts = new StreamReassembler();
    for (const chunk of chunks) texts.add(chunk);
    expect(texts.texts().map((entry) => entry.text)).toEqual([ANSWER]);

    const byDefault = await client.enqueue({ agent: 'loud', input: 'Weather?' });
    await client.wait(byDefault.run_id);
    const declined = await client.enqueue({ agent: 'loud', input: 'Weather?', stream: false });
    await client.wait(declined.run_id);
    expect(streamedBy(server, 'loud-model')).toEqual([true, false]);
  });

  it('a child run streams when its parent does, and not when its parent does not, whatever its own agent says', async () => {
    const { server, client } = await setup('children');
    const streaming = await client.enqueue({ agent: 'parent', input: 'Ask the helper', stream: true });
    expect(await client.wait(streaming.run_id)).toMatchObject({ status: 'completed', output: ANSWER });
    expect(streamedBy(server, 'parent-model')).toEqual([true, true]);
    expect(streamedBy(server, 'child-model')).toEqual([true]);
    const plain = await client.enqueue({ agent: 'parent', input: 'Ask the helper' });
    expect(await client.wait(plain.run_id)).toMatchObject({ status: 'completed', output: ANSWER });
    expect(streamedBy(server, 'parent-model')).toEqual([true, true, false, false]);
    expect(streamedBy(server, 'child-model')).toEqual([true, false]);
  });

  it.each([
    ['a refusal', { type: 'refusal', refusal: 'I cannot help with that.' } as FakeTurn, 'I cannot help with that.'],
    ['an empty answer', { type: 'text', content: '' } as FakeTurn, ''],
  ])('a run whose model gives %s completes the same streamed or not', async (_name, turn, output) => {
    const { server, client } = await setup(`answers-${output === '' ? 'empty' : 'refusal'}`, { turns: [turn, turn] });
    const streamed = await client.enqueue({ agent: 'loud', input: 'Weather?' });
    const plain = await client.enqueue({ agent: 'loud', input: 'Weather?', stream: false });
    const runs = [await client.wait(streamed.run_id), await client.wait(plain.run_id)];
    expect(runs.map((run) => [run.status, run.output, run.iterations])).toEqual([
      ['completed', output, 1],
      ['completed', output, 1],
    ]);
    expect(streamedBy(server, 'loud-model').sort()).toEqual([false, true]);
    const chunks = await readAll(client, streamed.run_id);
    expect(chunks.at(-1)).toMatchObject({ type: 'end', status: 'completed' });
  });

  it('refuses a stream option that is not true or false, queueing nothing', async () => {
    const { server, client } = await setup('refused');
    await expect(client.enqueue({ agent: 'quiet', input: 'hi', stream: 'yes' as never })).rejects.toThrow(/stream must be true or false, got "yes"/);
    expect((await client.list({ agent: 'quiet' })).runs).toEqual([]);
    expect(server.requests).toEqual([]);
    expect(() => new Agent({ name: 'bad', stream: 1 as never })).toThrow(/agent 'bad': stream must be true or false, got 1/);
  });
});
