import { Agent, type ChatMessage, type StepState, initialStepState, silentLogger, tool } from '@arcflow/core';
import { RunStore, createClient, keysFor, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, assertEventInvariants, reply, scriptedProvider, testPrefix, toolCall } from '@arcflow/testing';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { FAST, collect, fixtureWorkers, testResources, until } from './harness.ts';
import { uncompacted } from './uncompact.ts';

const { prefixes, open, redis } = testResources();

const PAGE = 'x'.repeat(4096);
const page = tool({ name: 'tx_page', description: 'a page', input_schema: { type: 'object' }, handler: () => PAGE });
const reader = new Agent({ name: 'tx_reader', instructions: 'read', tools: [page], loop_detection: false, tool_execution: { max_iterations: 1_000 } });

/** A model that calls the page tool until `rounds` results are in, then answers. */
const pages = (rounds: number) =>
  scriptedProvider(
    [
      (request) => {
        const done = request.messages.filter((message) => message.role === 'tool').length;
        return done >= rounds ? reply(`read ${done}`) : toolCall('tx_page', {}, `call_${done + 1}`);
      },
    ],
    { repeat: true },
  );

/** A run enqueued with no worker serving it yet (its record exists; nothing runs it). */
async function queuedRun(name: string): Promise<{ prefix: string; run_id: string }> {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  // A worker registers the agent, and stops.
  await (await startWorker({ agents: [reader], provider: pages(0), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST })).close();
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  const { run_id } = await client.enqueue({ agent: 'tx_reader', input: 'read' });
  return { prefix, run_id };
}

/** One round more: the model's call and its 4 KiB result. */
const grown = (state: StepState): StepState => {
  const n = state.iterations + 1;
  const call = { id: `call_${n}`, type: 'function' as const, function: { name: 'tx_page', arguments: '{}' } };
  const messages: ChatMessage[] = [...state.messages, { role: 'assistant', content: '', tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: PAGE }];
  return { ...state, iterations: n, messages };
};

const transcriptOf = async (prefix: string, run_id: string, step_id = 's1') => redis.lrange(keysFor(prefix).run(run_id).transcript(step_id), 0, -1);

describe('the append-only transcript (SPEC §11)', () => {
  it('sends Redis only the new messages of each save: as many bytes at round 300 as at round 10', async () => {
    const { prefix, run_id } = await queuedRun('tx-bytes');
    const connection = new Redis(TEST_REDIS_URL);
    open.push({ close: async () => void (await connection.quit()) });
    const store = new RunStore(connection, prefix, 3600);
    await connection.ping();
    const socket = (connection as unknown as { stream: { bytesWritten: number } }).stream;
    let state = initialStepState(reader, 'read', 's1');
    expect(await store.saveState(run_id, state, -1)).toBe('saved');
    const sent: number[] = [];
    for (let round = 1; round <= 300; round += 1) {
      const next = grown(state);
      const before = socket.bytesWritten;
      expect(await store.saveState(run_id, next, state.iterations)).toBe('saved');
      sent[round] = socket.bytesWritten - before;
      state = next;
    }
    expect(sent[10]).toBeLessThan(6_000);
    expect(sent[300]! / sent[10]!).toBeLessThan(1.25);
    // The state hash stays small; the list holds each message once.
    const keys = keysFor(prefix).run(run_id);
    expect((await redis.hget(keys.state('s1'), 'json'))!.length).toBeLessThan(1_000);
    const list = await transcriptOf(prefix, run_id);
    expect(list.length).toBe(state.messages.length);
    expect(new Set(list).size).toBe(list.length);
    // A save sent again (its reply lost) is stale and appends nothing.
    expect(await store.saveState(run_id, state, 299)).toBe('stale');
    expect(await redis.llen(keys.transcript('s1'))).toBe(state.messages.length);
    // Another worker (nothing cached) reads the whole state, then its saves send only what is new.
    const other = new RunStore(connection, prefix, 3600);
    expect(await other.loadState(run_id, 's1')).toEqual(state);
    const next = grown(state);
    const before = socket.bytesWritten;
    expect(await other.saveState(run_id, next, state.iterations)).toBe('saved');
    expect(socket.bytesWritten - before).toBeLessThan(sent[300]! * 1.25);
    // A worker that saves without having read sends every message; those stored already are skipped.
    const third = new RunStore(connection, prefix, 3600);
    expect(await third.saveState(run_id, grown(next), next.iterations)).toBe('saved');
    expect(await transcriptOf(prefix, run_id)).toEqual(grown(next).messages.map((message) => JSON.stringify(message)));
    expect(await store.loadState(run_id, 's1')).toEqual(grown(next));
  });

  it('runs an agent to the end with its messages in the list, once each, and the list expires with the run', async () => {
    const { prefix, run_id } = await queuedRun('tx-run');
    open.push(await startWorker({ agents: [reader], provider: pages(40), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    expect(await client.wait(run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', output: 'read 40' });
    await uncompacted(redis, prefix, run_id);
    const store = new RunStore(redis, prefix, 3600);
    const state = (await store.loadState(run_id, 's1'))!;
    expect(state.messages).toHaveLength(2 + 2 * 40);
    const list = await transcriptOf(prefix, run_id);
    expect(list).toEqual(state.messages.map((message) => JSON.stringify(message)));
    const ids = state.messages.flatMap((message) => (message.role === 'tool' ? [message.tool_call_id] : []));
    expect(new Set(ids).size).toBe(40);
    expect(await redis.ttl(keysFor(prefix).run(run_id).transcript('s1'))).toBeGreaterThan(0);
  });

  it('continues a run whose state a previous version stored with its messages inline (format 3)', async () => {
    const { prefix, run_id } = await queuedRun('tx-old');
    const old = {
      ...initialStepState(reader, 'read', 's1'),
      messages: [
        { role: 'system', content: 'You are stored by the previous version.' },
        { role: 'user', content: 'read' },
      ],
    };
    const keys = keysFor(prefix).run(run_id);
    await redis.hset(keys.state('s1'), 'iterations', 0, 'json', JSON.stringify({ v: 3, state: old }));
    const provider = pages(3);
    open.push(await startWorker({ agents: [reader], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    expect(await client.wait(run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', output: 'read 3' });
    await uncompacted(redis, prefix, run_id);
    expect(provider.requests[0]?.messages[0]).toEqual(old.messages[0]);
    // Its next save moved the messages into the list (format 4 from there on).
    expect(JSON.parse((await redis.hget(keys.state('s1'), 'json'))!)).toMatchObject({ v: 4, messages: 2 + 2 * 3 });
    const list = (await transcriptOf(prefix, run_id)).map((line) => JSON.parse(line) as ChatMessage);
    expect(list.slice(0, 2)).toEqual(old.messages);
    expect(list).toHaveLength(2 + 2 * 3);
  });
});

const { forTest } = fixtureWorkers(new URL('./fixtures/transcript-agents.ts', import.meta.url).pathname);
const fixture = await import('./fixtures/transcript-agents.ts');

describe('the transcript across a crash', () => {
  it('finishes a long run after SIGKILL mid-run on another worker, each message in the list once', async () => {
    const { prefix, url, start } = forTest('tx-kill');
    const client = createClient({ redis: url, prefix });
    open.push(client);
    const first = await start();
    const { run_id } = await client.enqueue({ agent: 'long_agent', input: 'read them all' });
    const transcript = keysFor(prefix).run(run_id).transcript('s1');
    await until(async () => (await redis.llen(transcript)) >= 30, 30_000, 10);
    first.kill('SIGKILL');
    await first.exited;
    await start();
    const run = await client.wait(run_id, { timeout_ms: 60_000 });
    expect(run).toMatchObject({ status: 'completed', output: `read ${fixture.ROUNDS} pages` });
    assertEventInvariants(await collect(client, run_id));
    // Its raw keys as they were while it ran (the worker that ended it compacts it).
    await uncompacted(redis, prefix, run_id);
    const list = await redis.lrange(transcript, 0, -1);
    expect(list).toHaveLength(1 + 2 * fixture.ROUNDS);
    expect(new Set(list).size).toBe(list.length);
    const state = await new RunStore(redis, prefix, 3600).loadState(run_id, 's1');
    expect(state?.messages.map((message) => JSON.stringify(message))).toEqual(list);
  }, 90_000);
});
