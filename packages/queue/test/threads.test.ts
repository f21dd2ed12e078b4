import { type ChatMessage, RequestError } from '@arcflow/core';
import { createClient } from '@arcflow/queue';
import { type FakeRequest, type FakeTurn, startFakeOpenAI } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { RunStore } from '../src/store/run-store.ts';
import { ThreadStore } from '../src/store/thread-store.ts';
import { fixtureWorkers, until } from './harness.ts';

// SPEC §11 "Threads", through `arcflow worker` processes and a fake OpenAI-compatible server:
// each run of a thread runs on the thread's conversation so far, and a run that completes appends
// its messages to the thread once (in the write that completes it), even across a SIGKILL.

const FIXTURE = new URL('./fixtures/thread-agents.ts', import.meta.url).pathname;
const { forTest } = fixtureWorkers(FIXTURE);

/** Answers by the conversation: `tool:<word>` asks for lookup, `block` for block, `fail` fails; a tool result gets a final answer. */
function answer(request: FakeRequest): FakeTurn {
  const last = request.body.messages.at(-1) as { role: string; content: string };
  if (last.role === 'tool') return { type: 'text', content: `after ${last.content}` };
  if (last.content.startsWith('tool:')) return { type: 'tools', calls: [{ name: 'lookup', arguments: { word: last.content.slice(5) } }] };
  if (last.content === 'block') return { type: 'tools', calls: [{ name: 'block', arguments: {} }] };
  if (last.content === 'fail') return { type: 'status', status: 400, body: { error: { message: 'no' } } };
  return { type: 'text', content: `re: ${last.content}` };
}

async function setup(name: string) {
  const fake = await startFakeOpenAI({ fallback: answer });
  const workers = forTest(name);
  const start = () => workers.start({ env: { FAKE_URL: fake.url } });
  const client = createClient({ redis: workers.url, prefix: workers.prefix });
  const store = new RunStore(workers.reader(), workers.prefix, 3600);
  const threads = new ThreadStore(workers.reader(), store.keys, workers.prefix, store.partitions);
  const close = async () => {
    await client.close();
    await fake.close();
  };
  return { fake, start, client, threads, close };
}

/** The messages of a request body after the instructions. */
const afterInstructions = (request: FakeRequest | undefined): ChatMessage[] => request?.body.messages.slice(1) ?? [];

describe('threads', () => {
  it('runs each of 5 runs on the messages of the runs before it, and appends each run once', async () => {
    const { fake, start, client, threads, close } = await setup('thread-five');
    await start();
    const inputs = ['hello', 'tool:apple', 'and then?', 'tool:pear', 'bye'];
    const expected: ChatMessage[] = [];
    for (const input of inputs) {
      const before = fake.requests.length;
      const { run_id } = await client.enqueue({ agent: 'chat', input, thread_id: 'user-42:chat' });
      expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
      // The run's first call: the instructions, the thread so far, then the input.
      expect(fake.requests[before]!.body.messages[0]).toEqual({ role: 'system', content: 'Chat along.' });
      expect(afterInstructions(fake.requests[before])).toEqual([...expected, { role: 'user', content: input }]);
      // What the run appended: its input, its turns with their tool calls and results, its answer.
      const last = afterInstructions(fake.requests.at(-1));
      expected.push(...last.slice(expected.length), { role: 'assistant', content: (await client.get(run_id))!.output! });
      expect(await threads.messages('user-42:chat')).toEqual(expected);
    }
    expect(expected).toHaveLength(5 * 2 + 2 * 2);
    expect(expected.filter((message) => message.role === 'tool')).toHaveLength(2);
    expect(await threads.runIds('user-42:chat')).toHaveLength(5);
    await close();
  });

  it('appends nothing for a failed run, and refuses a bad thread id naming thread_id', async () => {
    const { start, client, threads, close } = await setup('thread-failed');
    await start();
    const first = await client.enqueue({ agent: 'chat', input: 'hi', thread_id: 't1' });
    expect((await client.wait(first.run_id, { timeout_ms: 20_000 })).status).toBe('completed');
    const failed = await client.enqueue({ agent: 'chat', input: 'fail', thread_id: 't1' });
    expect((await client.wait(failed.run_id, { timeout_ms: 20_000 })).status).toBe('failed');
    expect(await threads.messages('t1')).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 're: hi' },
    ]);
    for (const thread_id of ['', 'a b', 'x'.repeat(129), 'é']) {
      const error = await client.enqueue({ agent: 'chat', input: 'hi', thread_id }).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(RequestError);
      expect(error).toMatchObject({ code: 'invalid_request', message: expect.stringContaining('thread_id') });
    }
    await close();
  });

  it('appends a run killed mid-tool (SIGKILL) exactly once, when another worker completes it', async () => {
    const { start, client, threads, close } = await setup('thread-kill');
    const first = await start();
    const { run_id } = await client.enqueue({ agent: 'chat', input: 'block', thread_id: 'killed' });
    await until(
      async () => {
        for await (const event of client.events(run_id)) if (event.kind === 'ToolCallStarted') return true;
        return false;
      },
      20_000,
      50,
    );
    first.kill('SIGKILL');
    await first.exited;
    await start();
    const run = await client.wait(run_id, { timeout_ms: 40_000 });
    expect(run.status).toBe('completed');
    const messages = await threads.messages('killed');
    expect(messages.map((message) => message.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(messages.at(-1)).toEqual({ role: 'assistant', content: 'after block done on execution 2' });
    await close();
  });
});
