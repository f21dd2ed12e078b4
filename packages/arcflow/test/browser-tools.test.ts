import { TEST_REDIS_URL, cleanupPrefix, testPrefix } from '@arcflow/testing';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { AbstractChat, type UIMessage, lastAssistantMessageIsCompleteWithApprovalResponses, lastAssistantMessageIsCompleteWithToolCalls } from 'ai';
import { ArcflowChatTransport } from 'arcflow/ai-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, spawnServe } from '../../../apps/server/test/harness.ts';
import { MemoryChatState, textOf } from './memory-chat.ts';

const AGENTS = new URL('../../../examples/browser-tools/agents.ts', import.meta.url).pathname;
const KEY = 'browser-write-0123456789';
const prefix = testPrefix('browser-tools');
let serve: ServeProcess;
let worker: WorkerProcess;

beforeAll(async () => {
  const env = { REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix };
  [serve, worker] = await Promise.all([spawnServe({ ...env, ARCFLOW_API_KEYS: `web:${KEY}:write` }), spawnWorker(AGENTS, { env })]);
}, 60_000);
afterAll(async () => {
  await Promise.all([serve?.stop(), worker?.stop()]);
  await cleanupPrefix(prefix);
});

type Part = { type: string; toolCallId?: string; state?: string; input?: unknown; approval?: { id: string } };
const parts = (chat: { memory: MemoryChatState }) => (chat.memory.messages.at(-1)?.parts ?? []) as Part[];

async function until(check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** `useChat`'s logic (the AI SDK's own chat) in memory, answering browser tools as a page would. */
class BrowserChat extends AbstractChat<UIMessage> {
  readonly memory: MemoryChatState;
  readonly asked: unknown[] = [];
  constructor(id: string, answer: (input: unknown) => { output: unknown } | { errorText: string }) {
    const state = new MemoryChatState();
    const transport = new ArcflowChatTransport({ api: serve.url, agent: 'concierge', headers: { authorization: `Bearer ${KEY}` } });
    super({
      id,
      transport,
      state,
      sendAutomaticallyWhen: (options) => lastAssistantMessageIsCompleteWithToolCalls(options) || lastAssistantMessageIsCompleteWithApprovalResponses(options),
      onToolCall: ({ toolCall }) => {
        if (toolCall.toolName !== 'get_location') return;
        this.asked.push(toolCall.input);
        const given = answer(toolCall.input);
        void this.addToolOutput(
          'output' in given
            ? { tool: 'get_location', toolCallId: toolCall.toolCallId, output: given.output }
            : { tool: 'get_location', toolCallId: toolCall.toolCallId, state: 'output-error', errorText: given.errorText },
        );
      },
    });
    this.memory = state;
  }
}

describe('browser tools and approvals in the AI SDK chat, through ArcflowChatTransport (SPEC §20)', () => {
  it('runs the browser tool, asks for the approval, posts both to the waiting run and streams on to the answer, in one run', async () => {
    const thread_id = `concierge-${prefix}`;
    const chat = new BrowserChat(thread_id, () => ({ output: { city: 'Oslo' } }));
    await chat.sendMessage({ text: 'Book me a table for tonight' });
    await until(() => parts(chat).some((part) => part.state === 'approval-requested'));
    expect(chat.asked).toEqual([{ reason: 'to find a restaurant near you' }]);
    const approval = parts(chat).find((part) => part.state === 'approval-requested')!;
    expect(approval.toolCallId).toBe('call_booking');
    await chat.addToolApprovalResponse({ id: approval.approval!.id, approved: true });
    await until(() => chat.memory.status === 'ready' && textOf(chat.memory.messages.at(-1)).length > 0);
    expect(textOf(chat.memory.messages.at(-1))).toBe('You are in Oslo. booked: a table for two tonight in Oslo, 19:30');
    expect(chat.memory.messages.map((message) => message.role)).toEqual(['user', 'assistant']);
    const thread = (await (await fetch(`${serve.url}/v1/threads/${thread_id}`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { runs: { status: string }[] };
    expect(thread.runs.map((run) => run.status)).toEqual(['completed']);
  });

  it('posts a browser tool’s error, and the model reads it', async () => {
    const chat = new BrowserChat(`refused-${prefix}`, () => ({ errorText: 'the user blocked location access' }));
    await chat.sendMessage({ text: 'Book me a table' });
    await until(() => chat.memory.status === 'ready' && textOf(chat.memory.messages.at(-1)).length > 0);
    expect(textOf(chat.memory.messages.at(-1))).toBe('I could not find where you are (Error: the user blocked location access).');
  });
});
