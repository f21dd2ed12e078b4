import { Agent, type ChatMessage, FINAL_ANSWER_NOTE, RequestError, initialStepState } from '@arcflow/core';
import { createClient } from '@arcflow/queue';
import { type FakeRequest, type FakeTurn, startFakeOpenAI } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { JobId, QueueName, hashTag, threadKeys } from '../src/redis/keys.ts';
import { RunStore } from '../src/runs/run-store.ts';
import { ThreadStore } from '../src/threads/thread-store.ts';
import { stageThreadMessages, startNextOnThread } from '../src/threads/thread-run.ts';
import { Dispatcher } from '../src/jobs/dispatcher.ts';
import { decodeArchive } from '../src/records/archive.ts';
import type { WorkerProcess } from '@arcflow/worker';
import { fixtureWorkers, jobEvents, until } from './harness.ts';

// SPEC §11 "Threads", through `arcflow worker` processes and a fake OpenAI-compatible server:
// each run of a thread runs on the thread's conversation so far, and a run that completes appends
// its messages to the thread once (in the write that completes it), even across a SIGKILL.

const FIXTURE = new URL('./fixtures/thread-agents.ts', import.meta.url).pathname;
const { forTest } = fixtureWorkers(FIXTURE);
/** The fixture's `chat` agent as a store sees it (its instructions). */
const chatAgent = new Agent({ name: 'chat', instructions: 'Chat along.' });

/**
 * Answers by the conversation: `tool:<word>` asks for lookup, `block` for block, `gate` for gate,
 * `fail` fails; a tool result gets a final answer; an invalid-output repair turn gets JSON.
 */
function answer(request: FakeRequest): FakeTurn {
  const messages = request.body.messages as { role: string; content: string }[];
  const last = messages.at(-1)!;
  // `gate, then fail`: the call after the gate's result fails (400).
  if (last.content !== 'gate, then fail' && messages.some((message) => message.role === 'user' && message.content === 'gate, then fail'))
    return { type: 'status', status: 400, body: { error: { message: 'no' } } };
  if (last.content === 'gate, then fail') return { type: 'tools', calls: [{ name: 'gate', arguments: {} }] };
  // A rejected answer's repair turn gets JSON.
  if (last.role === 'user' && last.content.startsWith('Error: invalid output')) return { type: 'text', content: '{"n":1}' };
  if (last.role === 'tool') return { type: 'text', content: `after ${last.content}` };
  if (last.content.startsWith('tool:')) return { type: 'tools', calls: [{ name: 'lookup', arguments: { word: last.content.slice(5) } }] };
  if (last.content === 'block') return { type: 'tools', calls: [{ name: 'block', arguments: {} }] };
  if (last.content === 'gate') return { type: 'tools', calls: [{ name: 'gate', arguments: {} }] };
  if (last.content === 'fail') return { type: 'status', status: 400, body: { error: { message: 'no' } } };
  return { type: 'text', content: `re: ${last.content}` };
}

async function setup(name: string) {
  const fake = await startFakeOpenAI({ fallback: answer });
  const workers = forTest(name);
  // Slow to start on a busy machine: a replacement in the SIGKILL test may take long.
  const start = () => workers.start({ env: { FAKE_URL: fake.url }, readyTimeoutMs: 120_000 });
  const client = createClient({ redis: workers.url, prefix: workers.prefix });
  const store = new RunStore(workers.reader(), workers.prefix, 3600);
  const threads = new ThreadStore(workers.reader(), store.keys, workers.prefix, store.partitions);
  const close = async () => {
    await client.close();
    await fake.close();
  };
  return { fake, start, client, threads, store, close, key: workers.key, reader: workers.reader };
}

/**
 * Chaos that slow starts do not hold back: every `periodMs` one of `live` is SIGKILLed at random
 * until two are left; then two loops each start a worker and, once it is ready, SIGKILL one of
 * the two in its place, and wait `periodMs`; until `stop`, which resolves with how many were killed.
 */
function killDownToTwo(live: WorkerProcess[], start: () => Promise<WorkerProcess>, periodMs: number): { stop(): Promise<number> } {
  let kills = 0;
  let stopping = false;
  const pause = () => new Promise((resolve) => setTimeout(resolve, periodMs));
  const kill = () => {
    live.splice(Math.floor(Math.random() * live.length), 1)[0]?.kill('SIGKILL');
    kills += 1;
  };
  const shrinking = (async () => {
    while (!stopping && live.length > 2) {
      await pause();
      if (!stopping) kill();
    }
  })();
  const replacing = async () => {
    await shrinking;
    while (!stopping) {
      const spare = await start();
      if (stopping) return void spare.kill('SIGKILL');
      kill();
      live.push(spare);
      await pause();
    }
  };
  const loops = Promise.all([replacing(), replacing()]);
  return {
    async stop() {
      stopping = true;
      await loops;
      return kills;
    },
  };
}

/** Resolves when the run has an event of this kind. */
const untilEvent = (client: ReturnType<typeof createClient>, run_id: string, kind: string) =>
  until(
    async () => {
      for await (const event of client.events(run_id)) if (event.kind === kind) return true;
      return false;
    },
    20_000,
    50,
  );

/** The messages of a request body after the instructions. */
const afterInstructions = (request: FakeRequest | undefined): ChatMessage[] => request?.body.messages.slice(1) ?? [];

describe('threads', () => {
  it('runs each of 5 runs on the messages of the runs before it, and appends each run once', async () => {
    const { fake, start, client, threads, store, reader, close } = await setup('thread-five');
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
    const runIds = await threads.runIds('user-42:chat');
    expect(runIds).toHaveLength(5);
    // The thread's messages are not copied into a run: its transcript list holds the instructions and its own messages only.
    // Ended, the run is compacted (docs/decisions/0031-compaction.md): its keys are in its archive.
    const fifth = store.keys.run(runIds[4]!);
    await until(async () => (await reader().hget(fifth.record, 'archived')) !== null);
    const archived = decodeArchive((await reader().getBuffer(fifth.archive))!);
    expect(JSON.parse(archived.hash(':s1:state').json!)).toMatchObject({ v: 5, messages: 2, state: { earlier: { at: 1, count: 12 } } });
    expect(archived.list(':s1:transcript')).toEqual([JSON.stringify({ role: 'system', content: 'Chat along.' }), JSON.stringify({ role: 'user', content: 'bye' })]);
    // The client's view: messages, runs in enqueue order, delete.
    const handle = client.thread('user-42:chat');
    expect(await handle.messages()).toEqual(expected);
    expect((await handle.runs()).map((run) => [run.status, run.thread_id])).toEqual(Array.from({ length: 5 }, () => ['completed', 'user-42:chat']));
    expect(await handle.delete()).toBe(true);
    expect(await handle.messages()).toEqual([]);
    expect(await client.thread('user-42:chat').runs()).toEqual([]);
    await expect(client.thread('no spaces').messages()).rejects.toMatchObject({ code: 'invalid_request', message: expect.stringContaining('thread_id') });
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
    const { fake, start, client, threads, close } = await setup('thread-kill');
    const first = await start();
    const earlier = await client.enqueue({ agent: 'chat', input: 'hello', thread_id: 'killed' });
    expect((await client.wait(earlier.run_id, { timeout_ms: 20_000 })).status).toBe('completed');
    const { run_id } = await client.enqueue({ agent: 'chat', input: 'block', thread_id: 'killed' });
    await until(
      async () => {
        for await (const event of client.events(run_id)) if (event.kind === 'ToolCallStarted') return true;
        return false;
      },
      20_000,
      50,
    );
    // A thread whose run is active is not deleted: that run reads the messages it began on from the thread.
    await expect(client.thread('killed').delete()).rejects.toMatchObject({ code: 'thread_busy', message: expect.stringContaining(run_id) });
    first.kill('SIGKILL');
    await first.exited;
    // A new process, which has read nothing of the thread: the run goes on on the conversation it began on.
    await start();
    const run = await client.wait(run_id, { timeout_ms: 40_000 });
    expect(run.status).toBe('completed');
    expect(afterInstructions(fake.requests.at(-1)).slice(0, 3)).toEqual([
      { role: 'user', content: 'hello' },
      { role: 'assistant', content: 're: hello' },
      { role: 'user', content: 'block' },
    ]);
    const messages = await threads.messages('killed');
    expect(messages.map((message) => message.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'tool', 'assistant']);
    expect(messages.at(-1)).toEqual({ role: 'assistant', content: 'after block done on execution 2' });
    await close();
  });

  it('runs 50 runs enqueued at once on one thread one at a time, in enqueue order, each on the turns before it', async () => {
    const { fake, start, client, threads, close } = await setup('thread-fifty');
    await start();
    const inputs = Array.from({ length: 50 }, (_, i) => `m${i}`);
    const enqueued = await Promise.all(inputs.map((input) => client.enqueue({ agent: 'chat', input, thread_id: 'busy' })));
    const order = await threads.runIds('busy');
    expect(new Set(order)).toEqual(new Set(enqueued.map(({ run_id }) => run_id)));
    const runs = await Promise.all(order.map((run_id) => client.wait(run_id, { timeout_ms: 50_000 })));
    expect(runs.every((run) => run.status === 'completed')).toBe(true);
    // One at a time: each run's first call was made after the run before it finished.
    const inputOf = new Map(await Promise.all(order.map(async (run_id) => [run_id, ((await client.get(run_id)) as unknown as { output: string }).output.slice(4)] as const)));
    const messages = await threads.messages('busy');
    expect(messages).toHaveLength(100);
    expect(messages.filter((_, i) => i % 2 === 0).map((message) => message.content)).toEqual(order.map((run_id) => inputOf.get(run_id)));
    // Each request saw exactly the turns of the runs before it, then its own input.
    expect(fake.requests.map((request) => request.body.messages.length)).toEqual(order.map((_, k) => 1 + 2 * k + 1));
    for (let k = 1; k < runs.length; k++) expect(runs[k]!.created_at <= runs[k]!.finished_at! && runs[k - 1]!.finished_at! <= runs[k]!.finished_at!).toBe(true);
    await close();
  }, 60_000);

  it('loses no queued run while workers are SIGKILLed every 0.7 s down to two, then one of two at a time (20 threads × 10 messages): each message and its answer in its thread once, in order', async () => {
    const { start, client, threads, close } = await setup('thread-chaos');
    // Five at first, so that kills land every 0.7 s however long a replacement takes to start.
    const live = await Promise.all(Array.from({ length: 5 }, () => start()));
    const chaos = killDownToTwo(live, start, 700);
    try {
      // Each run calls a tool: two provider calls and a tool job, each a place a kill can land.
      const words = (t: number) => Array.from({ length: 10 }, (_, i) => `t${t}m${i}`);
      const enqueued = await Promise.all(
        Array.from({ length: 20 }, async (_, t) => {
          const ids: string[] = [];
          for (const word of words(t)) ids.push((await client.enqueue({ agent: 'chat', input: `tool:${word}`, thread_id: `chaos-${t}` })).run_id);
          return ids;
        }),
      );
      const runs = await Promise.all(enqueued.flat().map((run_id) => client.wait(run_id, { timeout_ms: 240_000 })));
      const kills = await chaos.stop();
      expect(runs.filter((run) => run.status !== 'completed').map((run) => [run.run_id, run.status, run.error?.message])).toEqual([]);
      expect(kills).toBeGreaterThanOrEqual(3);
      for (let t = 0; t < 20; t++) {
        const messages = await threads.messages(`chaos-${t}`);
        expect(
          messages.map((message) => [
            message.role,
            message.role === 'assistant' && message.tool_calls ? message.tool_calls.map((call) => call.function.arguments) : message.content,
          ]),
        ).toEqual(
          words(t).flatMap((word) => [
            ['user', `tool:${word}`],
            ['assistant', [JSON.stringify({ word })]],
            ['tool', `found ${word}`],
            ['assistant', `after found ${word}`],
          ]),
        );
      }
    } finally {
      await chaos.stop();
      await close();
    }
  }, 300_000);

  it('refuses a run on a busy thread with on_busy: reject (thread_busy), queuing nothing', async () => {
    const { start, client, threads, close } = await setup('thread-reject');
    await start();
    const { run_id } = await client.enqueue({ agent: 'chat', input: 'block', thread_id: 'r' });
    await untilEvent(client, run_id, 'ToolCallStarted');
    const error = await client.enqueue({ agent: 'chat', input: 'hi', thread_id: 'r', on_busy: 'reject' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(RequestError);
    expect(error).toMatchObject({ code: 'thread_busy' });
    expect(await threads.runIds('r')).toEqual([run_id]);
    expect((await client.list({ agent: 'chat' })).runs.map((run) => run.run_id)).toEqual([run_id]);
    await close();
  });

  it('steers a run mid-tool-round: the input reaches its next provider call, and the steering run ends completed', async () => {
    const { fake, start, client, threads, close, key, reader } = await setup('thread-steer');
    await start();
    const { run_id } = await client.enqueue({ agent: 'chat', input: 'gate', thread_id: 's' });
    await untilEvent(client, run_id, 'ToolCallStarted');
    const steering = await client.enqueue({ agent: 'chat', input: 'also this', thread_id: 's', on_busy: 'steer' });
    expect(await client.get(steering.run_id)).toMatchObject({ status: 'completed', steered_into: run_id, thread_id: 's' });
    await reader().set(key('gate'), '1');
    expect(await client.wait(run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', output: 're: also this' });
    const second = fake.requests.at(-1)!.body.messages as { role: string; content: string }[];
    expect(second.slice(-2)).toEqual([
      { role: 'tool', tool_call_id: expect.any(String), content: 'gate opened' },
      { role: 'user', content: 'also this' },
    ]);
    const events = [];
    for await (const event of client.events(run_id)) events.push(event);
    expect(events.find((event) => event.kind === 'MessagesInjected')).toMatchObject({
      count: 1,
      input_size_bytes: JSON.stringify([{ role: 'user', content: 'also this' }]).length,
      iteration: 2,
    });
    expect((await threads.messages('s')).map((message) => message.role)).toEqual(['user', 'assistant', 'tool', 'user', 'assistant']);
    await close();
  });

  it('starts the next queued run when the active one is cancelled, on the transcript it left (nothing from the cancelled run)', async () => {
    const { start, client, threads, close } = await setup('thread-cancel');
    await start();
    const first = await client.enqueue({ agent: 'chat', input: 'block', thread_id: 'c' });
    await untilEvent(client, first.run_id, 'ToolCallStarted');
    const second = await client.enqueue({ agent: 'chat', input: 'next', thread_id: 'c' });
    expect((await client.get(second.run_id))?.status).toBe('queued');
    await client.cancel(first.run_id);
    const startedAt = Date.now();
    expect(await client.wait(second.run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', output: 're: next' });
    // Promoted by the cancel, not left to its job's delay.
    expect(Date.now() - startedAt).toBeLessThan(4_000);
    expect(await threads.messages('c')).toEqual([
      { role: 'user', content: 'next' },
      { role: 'assistant', content: 're: next' },
    ]);
    await close();
  });

  it('holds no job for a run waiting in its line: it starts when the run before it ends, and a cancelled waiting run leaves the line', async () => {
    const { start, client, threads, store, close, key, reader } = await setup('thread-line');
    await start();
    const queues = new Dispatcher(reader(), store.keys);
    try {
      const first = await client.enqueue({ agent: 'chat', input: 'gate', thread_id: 'line' });
      await untilEvent(client, first.run_id, 'ToolCallStarted');
      const cancelled = await client.enqueue({ agent: 'chat', input: 'never', thread_id: 'line' });
      const waiting = await client.enqueue({ agent: 'chat', input: 'next', thread_id: 'line' });
      const firstJob = (run_id: string) => queues.forRun(QueueName.agent('chat'), run_id).getJob(JobId.provider(run_id, 's1', 1));
      // Waiting, it holds no job that could be delivered again and again.
      expect(await firstJob(waiting.run_id)).toBeUndefined();
      expect(await threads.waitsInLine(waiting.run_id)).toBe(true);
      expect((await client.cancel(cancelled.run_id)).cancelled).toBe(true);
      expect(await reader().lrange(threadKeys(store.keys.tag, 'line').waiting, 0, -1)).toEqual([waiting.run_id]);
      await reader().set(key('gate'), '1');
      expect(await client.wait(waiting.run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', output: 're: next' });
      // Its first job was added when its turn came, and delivered once: one `active` in its queue's
      // event stream (the job itself, which ended the run, is removed when it completes).
      const events = await jobEvents(reader(), queues.forRun(QueueName.agent('chat'), waiting.run_id), JobId.provider(waiting.run_id, 's1', 1));
      expect(events.filter((event) => event === 'active')).toHaveLength(1);
      expect((await threads.messages('line')).map((message) => message.content)).toEqual(['gate', null, 'gate opened', 'after gate opened', 'next', 're: next']);
    } finally {
      await queues.close();
      await close();
    }
  });

  it('gives messages steered into a run that fails, or is cancelled, to a new run of the thread naming the steering run (steered_from)', async () => {
    const { start, client, threads, close, key, reader } = await setup('thread-steer-lost');
    await start();
    // The target's call after the gate took the steered message, then failed.
    const failing = await client.enqueue({ agent: 'chat', input: 'gate, then fail', thread_id: 'f' });
    await untilEvent(client, failing.run_id, 'ToolCallStarted');
    const steering = await client.enqueue({ agent: 'chat', input: 'also this', thread_id: 'f', on_busy: 'steer' });
    const after = await client.enqueue({ agent: 'chat', input: 'then this', thread_id: 'f' });
    await reader().set(key('gate'), '1');
    expect((await client.wait(failing.run_id, { timeout_ms: 20_000 })).status).toBe('failed');
    const follow = `${failing.run_id}-steered`;
    expect(await client.wait(follow, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', thread_id: 'f', steered_from: [steering.run_id], output: 're: also this' });
    expect(await client.wait(after.run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed' });
    expect(await threads.messages('f')).toEqual([
      { role: 'user', content: 'also this' },
      { role: 'assistant', content: 're: also this' },
      { role: 'user', content: 'then this' },
      { role: 'assistant', content: 're: then this' },
    ]);
    expect((await client.thread('f').runs()).map((run) => run.run_id)).toEqual([failing.run_id, steering.run_id, after.run_id, follow]);
    // Cancelled before any call took them: two steering runs' messages, in one new run.
    await reader().del(key('gate'));
    const target = await client.enqueue({ agent: 'chat', input: 'gate', thread_id: 'c' });
    await untilEvent(client, target.run_id, 'ToolCallStarted');
    const one = await client.enqueue({ agent: 'chat', input: 'one', thread_id: 'c', on_busy: 'steer' });
    const two = await client.enqueue({ agent: 'chat', input: 'two', thread_id: 'c', on_busy: 'steer' });
    await client.cancel(target.run_id);
    await reader().set(key('gate'), '1');
    expect(await client.wait(`${target.run_id}-steered`, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', steered_from: [one.run_id, two.run_id], output: 're: two' });
    expect(await threads.messages('c')).toEqual([
      { role: 'user', content: 'one' },
      { role: 'user', content: 'two' },
      { role: 'assistant', content: 're: two' },
    ]);
    // Steered inputs that together pass one enqueue's 256 KiB all reach the new run, which is the steering runs' tenant's, at their priority.
    await reader().del(key('gate'));
    const owned = { tenant: 'acme', priority: 2 };
    const big = await client.enqueue({ agent: 'chat', input: 'gate', thread_id: 'b', ...owned });
    await untilEvent(client, big.run_id, 'ToolCallStarted');
    const halves = ['x', 'y'].map((letter) => letter.repeat(150_000));
    const large = [];
    for (const input of halves) large.push(await client.enqueue({ agent: 'chat', input, thread_id: 'b', on_busy: 'steer', ...owned }));
    await client.cancel(big.run_id);
    await reader().set(key('gate'), '1');
    expect(await client.wait(`${big.run_id}-steered`, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', steered_from: large.map((run) => run.run_id), ...owned });
    expect(await threads.messages('b')).toEqual([...halves.map((content) => ({ role: 'user', content })), { role: 'assistant', content: `re: ${halves[1]}` }]);
    await close();
  });

  it("keeps arcflow's own notes out of the thread: the final-answer request, and the invalid-output repair turns with the answers they rejected", async () => {
    const { fake, start, client, threads, close } = await setup('thread-notes');
    await start();
    const brief = await client.enqueue({ agent: 'brief', input: 'tool:apple', thread_id: 'notes' });
    expect(await client.wait(brief.run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', output: `re: ${FINAL_ANSWER_NOTE}` });
    const strict = await client.enqueue({ agent: 'strict', input: 'count', thread_id: 'notes' });
    expect(await client.wait(strict.run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', output: '{"n":1}' });
    // Within the run, the model was told: its rejected answer and the repair turn.
    expect(afterInstructions(fake.requests.at(-1)).slice(-2)).toEqual([
      { role: 'assistant', content: 're: count' },
      { role: 'user', content: 'Error: invalid output — output is not valid JSON' },
    ]);
    const expected = [
      { role: 'user', content: 'tool:apple' },
      { role: 'assistant', content: `re: ${FINAL_ANSWER_NOTE}` },
      { role: 'user', content: 'count' },
      { role: 'assistant', content: '{"n":1}' },
    ];
    expect(await threads.messages('notes')).toEqual(expected);
    // The next run is shown the conversation, not the notes.
    const next = await client.enqueue({ agent: 'chat', input: 'bye', thread_id: 'notes' });
    expect((await client.wait(next.run_id, { timeout_ms: 20_000 })).status).toBe('completed');
    expect(afterInstructions(fake.requests.at(-1))).toEqual([...expected, { role: 'user', content: 'bye' }]);
    await close();
  });

  it('sends Redis no more for the completing iteration of a long run on a thread of 300 earlier runs than for a short run on a thread of 10', async () => {
    const { reader, prefix } = forTest('thread-bytes');
    const connection = reader().duplicate();
    const store = new RunStore(connection, prefix, 3600);
    const threads = new ThreadStore(connection, store.keys, prefix, store.partitions);
    await connection.ping();
    const socket = (connection as unknown as { stream: { bytesWritten: number } }).stream;
    const PAGE = 'x'.repeat(4096);
    const completingBytes = async (thread_id: string, earlierRuns: number, rounds: number) => {
      const list = threadKeys(hashTag(prefix), thread_id).messages;
      for (let n = 0; n < earlierRuns; n++) await connection.rpush(list, JSON.stringify({ role: 'user', content: `q${n}` }), JSON.stringify({ role: 'assistant', content: PAGE }));
      const run_id = `run_bytes_${thread_id}`;
      await store.createRun({ run_id, agent: 'chat', input: 'go', config: undefined, exec_config: undefined, trace: {}, definition_hash: '' }, undefined, {
        kind: 'RunEnqueued',
        step_id: 's1',
        agent: 'chat',
      });
      await threads.join(run_id, thread_id, 'queue', [{ role: 'user', content: 'go' }], 3600);
      const place = await threads.history(run_id);
      if (!place || 'waiting' in place) throw new Error('the run should start');
      let state = initialStepState(chatAgent, 'go', 's1', await store.threadMessages(run_id, place));
      expect(await store.saveState(run_id, state, -1)).toBe('saved');
      for (let n = 1; n <= rounds; n++) {
        const call = { id: `call_${n}`, type: 'function' as const, function: { name: 'lookup', arguments: '{}' } };
        const next = {
          ...state,
          iterations: n,
          messages: [...state.messages, { role: 'assistant' as const, content: null, tool_calls: [call] }, { role: 'tool' as const, tool_call_id: call.id, content: PAGE }],
        };
        expect(await store.saveState(run_id, next, state.iterations)).toBe('saved');
        state = next;
      }
      const before = socket.bytesWritten;
      await stageThreadMessages(threads, store, { run_id, step_id: 's1', agent: chatAgent }, state, 'done');
      await store.finishRun(run_id, { outcome: { status: 'completed', output: 'done' }, step_id: 's1' });
      const sent = socket.bytesWritten - before;
      // What was appended: the run's input, its 2 messages a round, its answer.
      const appended = await connection.lrange(list, earlierRuns * 2, -1);
      expect(appended).toHaveLength(1 + 2 * rounds + 1);
      expect(appended.at(-1)).toBe(JSON.stringify({ role: 'assistant', content: 'done' }));
      return sent;
    };
    try {
      const small = await completingBytes('few', 10, 10);
      const large = await completingBytes('many', 300, 300);
      expect(small).toBeLessThan(4096);
      expect(large / small).toBeLessThan(1.25);
    } finally {
      await connection.quit();
    }
  });

  it('finds a thread where it began when partitions are added, so its later runs are minted there', async () => {
    const { reader, prefix } = forTest('thread-partitions');
    const storeAt = () => new RunStore(reader(), prefix, 3600);
    const threadsAt = (store: RunStore) => new ThreadStore(reader(), store.keys, prefix, store.partitions);
    const before = storeAt();
    await before.partitions.ensure(2);
    const placed = await threadsAt(before).locate('grown');
    expect(placed.k).toBe(ThreadStore.partitionOf('grown', 2));
    await reader().rpush(threadKeys(placed.tag, 'grown').runs, 'run_x');
    await reader().rpush(threadKeys(hashTag(prefix), 'old').runs, 'run_y');
    const after = storeAt();
    await after.partitions.ensure(8);
    const threads = threadsAt(after);
    expect(await threads.locate('grown')).toEqual(placed);
    expect(await threads.locate('old')).toEqual({ k: undefined, tag: hashTag(prefix) });
    expect((await threads.locate('new')).k).toBe(ThreadStore.partitionOf('new', 8));
  });

  it("makes messages steered in after a run's last call the input of a new run, at the front of the line, naming the steering run", async () => {
    const { reader, prefix } = forTest('thread-late-steer');
    const store = new RunStore(reader(), prefix, 3600);
    const threads = new ThreadStore(reader(), store.keys, prefix, store.partitions);
    const create = (run_id: string, input: string) =>
      store.createRun({ run_id, agent: 'chat', input, config: undefined, exec_config: undefined, trace: {}, definition_hash: '' }, undefined, {
        kind: 'RunEnqueued',
        step_id: 's1',
        agent: 'chat',
      });
    const user = (content: string) => ({ role: 'user', content }) as const;
    const job = { queue: 'agent-chat', attempts: 3 };
    await create('run_lateactive', 'first');
    expect(await threads.join('run_lateactive', 'late', 'queue', [user('first')], 3600, job)).toEqual({ decision: 'start', active: 'run_lateactive' });
    await create('run_latequeued', 'queued');
    expect(await threads.join('run_latequeued', 'late', 'queue', [user('queued')], 3600, job)).toEqual({ decision: 'wait', active: 'run_lateactive' });
    await create('run_latesteer', 'also');
    expect(await threads.join('run_latesteer', 'late', 'steer', [user('also')], 3600, job, JSON.stringify({ traceparent: 'x' }))).toEqual({
      decision: 'steered',
      active: 'run_lateactive',
    });
    expect(await store.getRun('run_latesteer')).toMatchObject({ status: 'completed', steered_into: 'run_lateactive' });
    // The active run's last call was made before the steer: no call took the message.
    const state = initialStepState(chatAgent, 'first', 's1');
    expect(await store.saveState('run_lateactive', state, -1)).toBe('saved');
    await stageThreadMessages(threads, store, { run_id: 'run_lateactive', step_id: 's1', agent: chatAgent }, state, 'answer');
    await store.finishRun('run_lateactive', { outcome: { status: 'completed', output: 'answer' }, step_id: 's1' });
    expect(await threads.messages('late')).toEqual([user('first'), { role: 'assistant', content: 'answer' }]);
    const follow = 'run_lateactive-steered';
    expect(await store.getRun(follow)).toMatchObject({ status: 'queued', agent: 'chat', thread_id: 'late', steered_from: ['run_latesteer'] });
    expect((await store.getSpec(follow))?.input).toEqual([user('also')]);
    expect(await threads.runIds('late')).toEqual(['run_lateactive', 'run_latequeued', 'run_latesteer', follow]);
    // It is the thread's active run now, ahead of the run that was waiting.
    expect(await threads.next('run_lateactive')).toEqual({ run_id: follow, agent: 'chat', trace: { traceparent: 'x' }, job });
    expect(await threads.waitsInLine('run_latequeued')).toBe(true);
  });

  it("gives the run taking steered messages the stream choice of the steering run (SPEC §12), not the target's", async () => {
    const { reader, prefix } = forTest('thread-steer-stream');
    const store = new RunStore(reader(), prefix, 3600);
    const threads = new ThreadStore(reader(), store.keys, prefix, store.partitions);
    const user = (content: string) => ({ role: 'user', content }) as const;
    const create = (run_id: string, input: string, stream: boolean) =>
      store.createRun({ run_id, agent: 'chat', input, config: undefined, exec_config: undefined, trace: {}, definition_hash: '', stream }, undefined, {
        kind: 'RunEnqueued',
        step_id: 's1',
        agent: 'chat',
      });
    await create('run_streamtarget', 'first', false);
    await threads.join('run_streamtarget', 'streamed', 'queue', [user('first')], 3600);
    await create('run_streamsteer', 'also', true);
    await threads.join('run_streamsteer', 'streamed', 'steer', [user('also')], 3600, { queue: 'agent-chat', attempts: 3 }, JSON.stringify({ traceparent: 'x' }));
    await store.finishRun('run_streamtarget', { outcome: { status: 'cancelled' }, step_id: 's1' });
    expect(await store.getRun('run_streamtarget-steered')).toMatchObject({ status: 'queued', steered_from: ['run_streamsteer'] });
    expect((await store.getSpec('run_streamtarget-steered'))?.stream).toBe(true);
  });

  it("leaves the next run's first job delayed (a provider's pause, a retry's backoff) when the ended run's line is handed on again", async () => {
    const { reader, prefix } = forTest('thread-next-delayed');
    const store = new RunStore(reader(), prefix, 3600);
    const threads = new ThreadStore(reader(), store.keys, prefix, store.partitions);
    const queues = new Dispatcher(reader(), store.keys);
    try {
      const job = { queue: QueueName.agent('chat'), attempts: 3 };
      for (const [run_id, input] of [
        ['run_delayfirst', 'first'],
        ['run_delaynext', 'next'],
      ] as const) {
        await store.createRun({ run_id, agent: 'chat', input, config: undefined, exec_config: undefined, trace: {}, definition_hash: '' }, undefined, {
          kind: 'RunEnqueued',
          step_id: 's1',
          agent: 'chat',
        });
        await threads.join(run_id, 'delayed', 'queue', [{ role: 'user', content: input }], 3600, job);
      }
      await store.finishRun('run_delayfirst', { outcome: { status: 'cancelled' }, step_id: 's1' });
      await startNextOnThread(threads, queues, 'run_delayfirst');
      const queue = queues.forRun(job.queue, 'run_delaynext');
      const first = (await queue.getJob(JobId.provider('run_delaynext', 's1', 1)))!;
      expect(await first.getState()).toBe('prioritized');
      // Its call waits out its provider's pause: the job is delayed, as a worker delays it.
      await first.remove();
      await queue.add('provider', first.data, { ...first.opts, jobId: first.id!, delay: 60_000 });
      // A later delivery of the ended run's job hands the line on again: the pause holds.
      await startNextOnThread(threads, queues, 'run_delayfirst');
      expect(await (await queue.getJob(first.id!))!.getState()).toBe('delayed');
    } finally {
      await queues.close();
    }
  });

  it('gives a message steered in between two deliveries of a call to the next call, never to a delivery whose state may not stand', async () => {
    const { reader, prefix } = forTest('thread-steer-race');
    const store = new RunStore(reader(), prefix, 3600);
    const threads = new ThreadStore(reader(), store.keys, prefix, store.partitions);
    const user = (content: string) => ({ role: 'user', content }) as const;
    for (const [run_id, input] of [
      ['run_raceactive', 'first'],
      ['run_racesteer', 'between'],
    ]) {
      await store.createRun({ run_id: run_id!, agent: 'chat', input: input!, config: undefined, exec_config: undefined, trace: {}, definition_hash: '' }, undefined, {
        kind: 'RunEnqueued',
        step_id: 's1',
        agent: 'chat',
      });
    }
    await threads.join('run_raceactive', 'race', 'queue', [user('first')], 3600);
    // The delivery whose save stands found nothing to take for call 2 …
    expect(await threads.take('run_raceactive', 's1', 2)).toEqual([]);
    await threads.join('run_racesteer', 'race', 'steer', [user('between')], 3600);
    // … so a later delivery of call 2 (whose save will lose) takes nothing either, and call 3 takes it.
    expect(await threads.take('run_raceactive', 's1', 2)).toEqual([]);
    expect(await threads.take('run_raceactive', 's1', 3)).toEqual([user('between')]);
    expect(await threads.take('run_raceactive', 's1', 3)).toEqual([user('between')]);
  });
});
