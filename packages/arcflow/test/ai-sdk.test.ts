import { AbstractChat, type UIMessage, readUIMessageStream } from 'ai';
import { createToken } from 'arcflow';
import { ArcflowChatTransport } from 'arcflow/ai-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StreamStack, startStreamStack } from '../../../apps/server/test/stream-stack.ts';
import { expectedAnswer } from '../../queue/test/fixtures/stream-fake.ts';
import { MemoryChatState, textOf } from './memory-chat.ts';

const KEY = 'chat-write-0123456789';
const TOKEN_SECRET = 'chat-token-secret-0123456789-abcdefgh';
let stack: StreamStack;

beforeAll(async () => {
  stack = await startStreamStack('ai-sdk', `web:${KEY}:write`, 15, { ARCFLOW_TOKEN_SECRET: TOKEN_SECRET });
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

describe("ArcflowChatTransport with an end user's token (SPEC §19)", () => {
  const chatToken = (thread_id: string, subject = 'user-1') =>
    createToken({ secret: TOKEN_SECRET, thread_id, actions: ['read', 'send'], agents: ['stream_chat'], subject, expires_in_s: 300 });
  const runsOf = async (thread_id: string) =>
    (
      (await (await fetch(`${stack.serve.url}/v1/threads/${thread_id}`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as {
        runs: { enqueued_by?: string }[];
      }
    ).runs;

  it('chats on its thread with a token instead of a key; the runs say whose they are', async () => {
    const thread_id = `token-${stack.prefix}`;
    const chat = new NodeChat(thread_id, new ArcflowChatTransport({ api: stack.serve.url, agent: 'stream_chat', token: await chatToken(thread_id) }));
    await chat.sendMessage({ text: 'Weather in Bergen?' });
    expect(chat.memory.status).toBe('ready');
    expect(textOf(chat.memory.messages[1])).toBe(expectedAnswer('Weather in Bergen?'));
    expect((await runsOf(thread_id)).map((run) => run.enqueued_by)).toEqual(['token:user-1']);
    // The same token on another chat (thread) is refused: the chat shows the server's 403.
    const elsewhere = new NodeChat(`other-${stack.prefix}`, new ArcflowChatTransport({ api: stack.serve.url, agent: 'stream_chat', token: await chatToken(thread_id) }));
    await elsewhere.sendMessage({ text: 'Hello?' });
    expect(elsewhere.memory.status).toBe('error');
    expect(elsewhere.memory.error?.message).toMatch(/answered 403 to POST \/v1\/runs: this token enqueues on thread/);
  });

  it('calls a token function once, and again when the server answers 401 (a token it no longer takes); the streamed answer and a reconnect use the new one', async () => {
    const thread_id = `renew-${stack.prefix}`;
    const stale = await createToken({ secret: 'a-secret-this-server-never-held-0123456789', thread_id, actions: ['read', 'send'], agents: ['stream_chat'] });
    const given: string[] = [];
    const token = async () => {
      const next = given.length === 0 ? stale : await chatToken(thread_id, 'user-2');
      given.push(next);
      return next;
    };
    const transport = new ArcflowChatTransport({ api: stack.serve.url, agent: 'stream_chat', token });
    const chat = new NodeChat(thread_id, transport);
    await chat.sendMessage({ text: 'First with a stale token' });
    expect(textOf(chat.memory.messages[1])).toBe(expectedAnswer('First with a stale token'));
    // Asked once for the first request, once after its 401; the stream's requests reuse the second.
    expect(given).toHaveLength(2);
    await chat.sendMessage({ text: 'Then with the fresh one' });
    expect(textOf(chat.memory.messages[3])).toBe(expectedAnswer('Then with the fresh one'));
    expect(given).toHaveLength(2);
    expect(await transport.reconnectToStream({ chatId: thread_id })).toBeNull();
    expect((await runsOf(thread_id)).map((run) => run.enqueued_by)).toEqual(['token:user-2', 'token:user-2']);
  });

  it("renews on a 401 to the stream's request too, and the answer shows once", async () => {
    const thread_id = `expiring-${stack.prefix}`;
    let calls = 0;
    const token = async () => (calls++, chatToken(thread_id, `user-${calls}`));
    // The first stream request meets a 401, as a token that expired between the enqueue and the stream would.
    let refusedOnce = false;
    const expiring: typeof fetch = async (input, init) => {
      if (String(input).includes('/stream') && !refusedOnce) {
        refusedOnce = true;
        return new Response(JSON.stringify({ status: 401, code: 'unauthorized', detail: 'the token has expired; get a new one' }), { status: 401 });
      }
      return fetch(input, init);
    };
    const chat = new NodeChat(thread_id, new ArcflowChatTransport({ api: stack.serve.url, agent: 'stream_chat', token, fetch: expiring }));
    await chat.sendMessage({ text: 'Across an expiry?' });
    expect(chat.memory.status).toBe('ready');
    expect(textOf(chat.memory.messages[1])).toBe(expectedAnswer('Across an expiry?'));
    expect(calls).toBe(2);
  });

  it('gives up after one renewal still refused, naming the 401; a string token is not renewed', async () => {
    const thread_id = `refused-${stack.prefix}`;
    const foreign = await createToken({ secret: 'a-secret-this-server-never-held-0123456789', thread_id, actions: ['read', 'send'], agents: ['stream_chat'] });
    let calls = 0;
    const renewing = new NodeChat(thread_id, new ArcflowChatTransport({ api: stack.serve.url, agent: 'stream_chat', token: () => (calls++, foreign) }));
    await renewing.sendMessage({ text: 'Anyone?' });
    expect(renewing.memory.status).toBe('error');
    expect(renewing.memory.error?.message).toMatch(/answered 401 to POST \/v1\/runs: the token is not valid/);
    expect(calls).toBe(2);
    const fixed = new NodeChat(thread_id, new ArcflowChatTransport({ api: stack.serve.url, agent: 'stream_chat', token: foreign }));
    await fixed.sendMessage({ text: 'Anyone?' });
    expect(fixed.memory.error?.message).toMatch(/answered 401/);
    expect(() => new ArcflowChatTransport({ api: stack.serve.url, agent: 'stream_chat', token: 42 as never })).toThrow(/token must be a string or a function/);
  });
});
