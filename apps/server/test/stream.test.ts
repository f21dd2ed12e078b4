import { type StreamChunk, StreamReassembler } from '@arcflow/core';
import { type UIMessage, type UIMessageChunk, readUIMessageStream } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectedAnswer } from '../../../packages/queue/test/fixtures/stream-fake.ts';
import { type SseMessage, readSse } from './harness.ts';
import { type StreamStack, startStreamStack } from './stream-stack.ts';

const KEYS = { read: 'stream-read-0123456789', write: 'stream-write-0123456789' };
let stack: StreamStack;

beforeAll(async () => {
  stack = await startStreamStack('api-stream', `viewer:${KEYS.read}:read,backend:${KEYS.write}:write`, 15);
});
afterAll(() => stack?.stop());

const call = (path: string, init: RequestInit & { key?: keyof typeof KEYS | null } = {}) => {
  const { key = 'read', headers, ...rest } = init;
  return fetch(`${stack.serve.url}${path}`, { ...rest, headers: { ...(key ? { authorization: `Bearer ${KEYS[key]}` } : {}), ...(headers as Record<string, string>) } });
};
async function enqueue(input: string): Promise<string> {
  const response = await call('/v1/runs', {
    method: 'POST',
    key: 'write',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ agent: 'stream_agent', input }),
  });
  return ((await response.json()) as { run_id: string }).run_id;
}
const chunksOf = (messages: readonly SseMessage[]) => messages.filter((message) => message.data).map((message) => JSON.parse(message.data!) as StreamChunk);
const lastText = (chunks: readonly StreamChunk[]) => {
  const reassembler = new StreamReassembler();
  for (const chunk of chunks) reassembler.add(chunk);
  return reassembler.texts().at(-1)?.text;
};

describe('GET /v1/runs/{run_id}/stream (SPEC §12)', () => {
  it('serves the run stream as SSE (id: offset, event: type, data: chunk) until its end, and resumes after Last-Event-ID or ?after with nothing lost or repeated', async () => {
    const run_id = await enqueue('over http');
    const response = await call(`/v1/runs/${run_id}/stream`);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    // Dropped after the fifth chunk, as a browser's connection may be.
    const { messages: first } = await readSse(response, (_message, all) => all.length === 5);
    expect(first.map((message) => Number(message.id))).toEqual([1, 2, 3, 4, 5]);
    for (const message of first) expect(JSON.parse(message.data!)).toMatchObject({ offset: Number(message.id), type: message.event });
    const { messages: rest } = await readSse(await call(`/v1/runs/${run_id}/stream`, { headers: { 'last-event-id': '5' } }));
    const chunks = chunksOf([...first, ...rest]);
    expect(chunks.map((chunk) => chunk.offset)).toEqual(chunks.map((_, index) => index + 1));
    expect(chunks.at(-1)).toMatchObject({ type: 'end', status: 'completed' });
    const run = (await (await call(`/v1/runs/${run_id}`)).json()) as { output: string };
    expect(lastText(chunks)).toBe(run.output);
    expect(run.output).toBe(expectedAnswer('over http'));
    // ?after=n on an ended run: what is left after n, then the end of the response.
    const { messages: tail } = await readSse(await call(`/v1/runs/${run_id}/stream?after=${chunks.length - 2}`));
    expect(chunksOf(tail)).toEqual(chunks.slice(-2));
    // Nothing after the end of an ended run: 204, which stops an EventSource from reconnecting.
    expect((await call(`/v1/runs/${run_id}/stream`, { headers: { 'last-event-id': String(chunks.length) } })).status).toBe(204);
  });

  it('answers in the AI SDK UI message stream protocol when asked, which the ai package reads into the run output', async () => {
    const run_id = await enqueue('for useChat');
    const asks: { query: string; headers: Record<string, string> }[] = [
      { query: '?format=ai-sdk', headers: {} },
      { query: '', headers: { 'x-vercel-ai-ui-message-stream': 'v1' } },
    ];
    for (const ask of asks) {
      const response = await call(`/v1/runs/${run_id}/stream${ask.query}`, { headers: ask.headers });
      expect(response.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
      const { messages } = await readSse(response);
      expect(messages.at(-1)?.data).toBe('[DONE]');
      const chunks = messages.slice(0, -1).map((message) => JSON.parse(message.data!) as UIMessageChunk);
      expect(chunks[0]).toEqual({ type: 'start', messageId: run_id });
      expect(chunks.at(-1)).toEqual({ type: 'finish', finishReason: 'stop' });
      const message = await lastMessage(chunks);
      const text = message.parts.filter((part) => part.type === 'text').map((part) => (part as { text: string }).text);
      expect(text).toEqual([expectedAnswer('for useChat')]);
      expect(message.parts.some((part) => part.type === 'dynamic-tool' && part.toolName === 'stream_lookup' && part.state === 'output-available')).toBe(true);
    }
  });

  it('resumes the AI SDK format after Last-Event-ID in the state the reader had', async () => {
    const run_id = await enqueue('resumed for useChat');
    const { messages: first } = await readSse(await call(`/v1/runs/${run_id}/stream?format=ai-sdk`), (message) => message.id !== undefined && Number(message.id) >= 6);
    const lastId = first.filter((message) => message.id !== undefined).at(-1)!.id!;
    const { messages: rest } = await readSse(await call(`/v1/runs/${run_id}/stream?format=ai-sdk`, { headers: { 'last-event-id': lastId } }));
    expect(rest.map((message) => message.data)).not.toContain(JSON.stringify({ type: 'start', messageId: run_id }));
    const chunks = [...first, ...rest.slice(0, -1)].map((message) => JSON.parse(message.data!) as UIMessageChunk);
    const message = await lastMessage(chunks);
    expect(message.parts.filter((part) => part.type === 'text').map((part) => (part as { text: string }).text)).toEqual([expectedAnswer('resumed for useChat')]);
  });

  it("ends a failed run's AI SDK stream with an error naming the failure", async () => {
    stack.fake.push({ type: 'status', status: 400, body: { error: { message: 'no' } } });
    const response = await call('/v1/runs', {
      method: 'POST',
      key: 'write',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ agent: 'stream_chat', input: 'fail' }),
    });
    const { run_id } = (await response.json()) as { run_id: string };
    const { messages } = await readSse(await call(`/v1/runs/${run_id}/stream?format=ai-sdk`));
    const chunks = messages.filter((message) => message.data !== '[DONE]').map((message) => JSON.parse(message.data!) as UIMessageChunk);
    expect(chunks.at(-1)).toEqual({ type: 'error', errorText: expect.stringMatching(/^the run failed \(provider_error\): /) });
    // A reader that read it all and resumes after the last id gets nothing again.
    const lastId = messages.filter((message) => message.id !== undefined).at(-1)!.id!;
    const { messages: again } = await readSse(await call(`/v1/runs/${run_id}/stream?format=ai-sdk`, { headers: { 'last-event-id': lastId } }));
    expect(again.map((message) => message.data)).toEqual(['[DONE]']);
  });

  it('takes `stream` at enqueue: true streams a run of an agent that does not by default, anything but a boolean is a 400', async () => {
    const post = (body: unknown) => call('/v1/runs', { method: 'POST', key: 'write', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const modelCalls = () => stack.fake.requests.filter((request) => (request.body.messages as { content: unknown }[]).some((message) => message.content === 'asked over http'));
    const asked = (await (await post({ agent: 'stream_chat', input: 'asked over http', stream: true })).json()) as { run_id: string };
    const { messages } = await readSse(await call(`/v1/runs/${asked.run_id}/stream`));
    expect(chunksOf(messages).at(-1)).toMatchObject({ type: 'end', status: 'completed' });
    expect(modelCalls().map((request) => request.body.stream)).toEqual([true]);
    const refused = await post({ agent: 'stream_chat', input: 'refused', stream: 'yes' });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(await refused.json())).toContain('stream');
  });

  it('refuses an unknown run (404), a missing key (401) and a bad offset (400)', async () => {
    expect((await call('/v1/runs/run_unknown/stream')).status).toBe(404);
    expect((await call('/v1/runs/run_unknown/stream', { key: null })).status).toBe(401);
    expect((await call('/v1/runs/run_unknown/stream?after=-3')).status).toBe(400);
    expect((await call('/v1/runs/run_unknown/stream', { headers: { 'last-event-id': 'x' } })).status).toBe(400);
  });
});

async function lastMessage(chunks: readonly UIMessageChunk[]): Promise<UIMessage> {
  const stream = new ReadableStream<UIMessageChunk>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  let last: UIMessage | undefined;
  for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message;
  return last!;
}
