import { AbstractChat, type UIMessage, readUIMessageStream } from 'ai';
import { ArcflowChatTransport } from 'arcflow/ai-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StreamStack, startStreamStack } from '../../../apps/server/test/stream-stack.ts';
import { expectedAnswer } from '../../queue/test/fixtures/stream-fake.ts';
import { MemoryChatState, textOf } from './memory-chat.ts';

const KEY = 'chat-write-0123456789';
let stack: StreamStack;

beforeAll(async () => {
  stack = await startStreamStack('ai-sdk', `web:${KEY}:write`, 15);
});
afterAll(() => stack?.stop());

class NodeChat extends AbstractChat<UIMessage> {
  readonly memory: MemoryChatState;
  constructor(id: string, transport: ArcflowChatTransport) {
    const state = new MemoryChatState();
    super({ id, transport, state });
    this.memory = state;
  }
}

/** A fetch that cuts the first stream response it serves after `bytes` bytes, as a dropped connection would. */
function droppingFetch(bytes: number): { fetch: typeof fetch; streamRequests: Headers[] } {
  const streamRequests: Headers[] = [];
  let dropped = false;
  const wrapped: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    if (!String(input).includes('/stream')) return response;
    streamRequests.push(new Headers(init?.headers));
    if (dropped) return response;
    dropped = true;
    const reader = response.body!.getReader();
    let sent = 0;
    const cut = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done || sent >= bytes) {
          await reader.cancel();
          controller.error(new TypeError('terminated'));
          return;
        }
        sent += value.byteLength;
        controller.enqueue(value);
      },
    });
    return new Response(cut, { status: response.status, headers: response.headers });
  };
  return { fetch: wrapped, streamRequests };
}

const threadMessages = async (thread_id: string) =>
  (
    (await (await fetch(`${stack.serve.url}/v1/threads/${thread_id}`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as {
      messages: { role: string; content: unknown }[];
    }
  ).messages;

describe('ArcflowChatTransport with the AI SDK 7 chat (SPEC §12)', () => {
  it("sends a message on the chat's thread and shows the streamed answer; the next message continues the thread", async () => {
    const thread_id = `chat-${stack.prefix}`;
    const chat = new NodeChat(thread_id, new ArcflowChatTransport({ api: stack.serve.url, agent: 'stream_chat', headers: { authorization: `Bearer ${KEY}` } }));
    await chat.sendMessage({ text: 'Weather in Oslo?' });
    expect(chat.memory.status).toBe('ready');
    expect(chat.memory.messages.map((message) => message.role)).toEqual(['user', 'assistant']);
    expect(textOf(chat.memory.messages[1])).toBe(expectedAnswer('Weather in Oslo?'));
    await chat.sendMessage({ text: 'And tomorrow?' });
    expect(textOf(chat.memory.messages[3])).toBe(expectedAnswer('And tomorrow?'));
    // The thread holds the conversation: both questions and both answers.
    const messages = await threadMessages(thread_id);
    expect(messages.map((message) => message.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(messages[3]?.content).toBe(expectedAnswer('And tomorrow?'));
    // A chat's runs always ask to stream, though `stream_chat` does not by default: each model call was streamed.
    const asked = stack.fake.requests.filter((request) => (request.body.messages as { content: unknown }[]).some((message) => message.content === 'Weather in Oslo?'));
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.every((request) => request.body.stream === true)).toBe(true);
  });

  it('resumes with Last-Event-ID when the connection drops, and the answer shows once', async () => {
    const dropping = droppingFetch(700);
    const chat = new NodeChat(
      `drop-${stack.prefix}`,
      new ArcflowChatTransport({ api: stack.serve.url, agent: 'stream_chat', headers: { authorization: `Bearer ${KEY}` }, fetch: dropping.fetch }),
    );
    await chat.sendMessage({ text: 'Across a dropped connection?' });
    expect(dropping.streamRequests.length).toBe(2);
    expect(dropping.streamRequests[1]?.get('last-event-id')).toMatch(/^[0-9]+$/);
    expect(chat.memory.status).toBe('ready');
    expect(textOf(chat.memory.messages[1])).toBe(expectedAnswer('Across a dropped connection?'));
  });

  it("reconnects to the thread's active run from its start after the reader went away, and finds none once it ended", async () => {
    const thread_id = `resume-${stack.prefix}`;
    const transport = new ArcflowChatTransport({ api: stack.serve.url, agent: 'stream_chat', headers: () => ({ authorization: `Bearer ${KEY}` }) });
    const aborted = new AbortController();
    const stream = await transport.sendMessages({
      trigger: 'submit-message',
      chatId: thread_id,
      messageId: undefined,
      messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Leave and come back' }] }],
      abortSignal: aborted.signal,
    });
    const reader = stream.getReader();
    await reader.read();
    // Stops the reading only: the run goes on.
    aborted.abort();
    await reader.read().catch(() => undefined);
    const resumed = await transport.reconnectToStream({ chatId: thread_id });
    expect(resumed).not.toBeNull();
    let last: UIMessage | undefined;
    for await (const message of readUIMessageStream({ stream: resumed!, terminateOnError: true })) last = message;
    expect(textOf(last)).toBe(expectedAnswer('Leave and come back'));
    expect(await transport.reconnectToStream({ chatId: thread_id })).toBeNull();
    expect(await transport.reconnectToStream({ chatId: `never-${stack.prefix}` })).toBeNull();
  });

  it('refuses what it cannot do, clearly', async () => {
    const transport = new ArcflowChatTransport({ api: stack.serve.url, agent: 'stream_chat', headers: { authorization: `Bearer ${KEY}` } });
    const base = { chatId: 't1', messageId: undefined, abortSignal: undefined };
    await expect(transport.sendMessages({ ...base, trigger: 'regenerate-message', messages: [] })).rejects.toThrow(/regenerating a message is not supported/);
    await expect(
      transport.sendMessages({ ...base, trigger: 'submit-message', chatId: 'bad id!', messages: [{ id: 'u', role: 'user', parts: [{ type: 'text', text: 'x' }] }] }),
    ).rejects.toThrow(/chat id is the thread id/);
    await expect(
      transport.sendMessages({
        ...base,
        trigger: 'submit-message',
        messages: [{ id: 'u', role: 'user', parts: [{ type: 'file', mediaType: 'application/pdf', url: 'data:,x' }] }],
      }),
    ).rejects.toThrow(/images, not 'application\/pdf'/);
    const unknown = new ArcflowChatTransport({ api: stack.serve.url, agent: 'no_such_agent', headers: { authorization: `Bearer ${KEY}` } });
    await expect(unknown.sendMessages({ ...base, trigger: 'submit-message', messages: [{ id: 'u', role: 'user', parts: [{ type: 'text', text: 'x' }] }] })).rejects.toThrow(
      /answered 404 to POST \/v1\/runs: .*no_such_agent/,
    );
    expect(() => new ArcflowChatTransport({ api: 'not a url', agent: 'a' })).toThrow(/api must be the base URL/);
  });
});
