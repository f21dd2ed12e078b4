import { Agent, type ModelProvider, ProviderFailure, type StreamChunk, silentLogger, tool } from '@arcflow/core';
import { type ArcflowClient, JobId, QueueName, RunStore, createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, assertEventInvariants, capturingLogger, reply, scriptedProvider, testPrefix, toolCalls } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { writeTheOldWay } from './uncompact.ts';
import { storeScripts } from '../src/scripts.ts';
import { runJobs } from '../src/runs/compaction.ts';
import { collect, fixtureWorkers, testResources, until } from './harness.ts';

const { prefixes, open, redis } = testResources();
const { forTest } = fixtureWorkers(new URL('./fixtures/crash-agents.ts', import.meta.url).pathname);
const dyingAtCompaction = fixtureWorkers(new URL('./fixtures/compaction-agents.ts', import.meta.url).pathname);

const echo = tool({
  name: 'echo',
  description: 'echoes its text',
  input_schema: { type: 'object', properties: { text: { type: 'string' } } },
  handler: ({ text }: { text?: string }) => `echoed ${text ?? ''}`,
});

/** A run of three provider calls and three tool calls, on a thread, enqueued with an idempotency key; ended and compacted. */
async function finishedRun(name: string) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  const provider = scriptedProvider(
    [
      toolCalls([
        { name: 'echo', args: { text: 'a' }, id: 'c_a' },
        { name: 'echo', args: { text: 'b' }, id: 'c_b' },
      ]),
      toolCalls([{ name: 'echo', args: { text: 'c' }, id: 'c_c' }]),
      reply('all echoed'),
    ],
    { repeat: true },
  );
  const worker = await startWorker({ agents: [new Agent({ name: 'keeper', tools: [echo] })], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger });
  open.push(worker);
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  const store = new RunStore(redis, prefix, 7 * 24 * 3600);
  const request = { agent: 'keeper', input: 'echo a, b, then c', thread_id: 'th1', idempotency_key: 'order-7' };
  const { run_id } = await client.enqueue(request);
  expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
  const record = store.keys.record(run_id);
  await until(async () => (await redis.hget(record, 'archived')) !== null);
  return { prefix, client, provider, store, run_id, record, request };
}

/** Everything that reads a finished run, through the client and the store. */
async function readings(client: ArcflowClient, store: RunStore, run_id: string) {
  const chunks: StreamChunk[] = [];
  for await (const chunk of client.stream(run_id)) chunks.push(chunk);
  return {
    run: await client.get(run_id),
    waited: await client.wait(run_id, { timeout_ms: 1_000 }),
    events: await collect(client, run_id),
    eventsFrom3: await store.events(run_id, 3),
    messages: await client.messages(run_id),
    stream: chunks,
    streamAfter2: await store.streams.read(run_id, 2),
    listed: (await client.list({ agent: 'keeper' })).runs.map((run) => run.run_id),
    thread: await client.thread('th1').messages(),
    threadRuns: (await client.thread('th1').runs()).map((run) => run.run_id),
    toolCallIds: await store.toolCallIds(run_id, [
      { step_id: 's1', iteration: 1 },
      { step_id: 's1', iteration: 2 },
      { step_id: 's1', iteration: 3 },
    ]),
    state: await store.loadState(run_id, 's1'),
    conversation: await store.stepConversation(run_id, 's1'),
    stateEntries: await store.stateLogs.length(run_id, 's1'),
    // What a provider job (or a fork of the run) reads of a round: its responses and the round before's results.
    step2: await store.loadStep(run_id, 's1', 2),
    step3: await store.loadStep(run_id, 's1', 3),
  };
}

describe('an ended run compacted into its record and one archive', () => {
  it('reads the same through every path compacted as written the old way, keeps 3 keys that expire together, and compacts a run of the old layout', async () => {
    const { prefix, client, store, run_id, record } = await finishedRun('compact-read');
    const compacted = await readings(client, store, run_id);
    expect(compacted.run).toMatchObject({ status: 'completed', output: 'all echoed', thread_id: 'th1' });
    assertEventInvariants(compacted.events);
    expect(compacted.events.map((event) => event.kind)).toContain('RunCompleted');
    expect(compacted.eventsFrom3[0]?.seq).toBe(4);
    expect(compacted.messages.messages.map((message) => message.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'assistant', 'tool', 'assistant']);
    expect(compacted.stream.at(-1)).toMatchObject({ type: 'end', status: 'completed' });
    expect(compacted.streamAfter2[0]?.offset).toBe(3);
    expect(compacted.listed).toEqual([run_id]);
    expect(compacted.threadRuns).toEqual([run_id]);
    expect(compacted.thread.at(-1)).toMatchObject({ role: 'assistant', content: 'all echoed' });
    expect(compacted.toolCallIds).toEqual([['c_a', 'c_b'], ['c_c'], []]);
    expect(compacted.state?.messages.length).toBe(compacted.conversation.length);
    expect(compacted.step2.previousResults).toEqual({ c_a: 'echoed a', c_b: 'echoed b' });
    expect(compacted.step3.response?.response.content).toBe('all echoed');
    expect(compacted.step3.state?.messages.length).toBe(compacted.conversation.length);
    // Its record, its archive and its idempotency key: nothing else, not BullMQ's jobs either.
    const keys = (await redis.keys(`*${prefix}*`)).filter((key) => key.includes(run_id) || key.includes('order-7'));
    expect(keys.sort()).toEqual([record, `${record}:archive`, `{${prefix}}:idempotency:order-7`].sort());
    const ttls = await Promise.all(keys.map((key) => redis.ttl(key)));
    for (const ttl of ttls) expect(ttl).toBeGreaterThan(7 * 24 * 3600 - 60);
    expect(Math.max(...ttls) - Math.min(...ttls)).toBeLessThanOrEqual(2);

    // The version before compaction's layout reads the same, and compacts to what it was.
    await writeTheOldWay(redis, record);
    expect((await redis.keys(`${record}:*`)).length).toBeGreaterThan(8);
    const old = await readings(client, store, run_id);
    expect(old).toEqual(compacted);
    expect(await store.compactRun(run_id)).toBe(true);
    expect(await store.compactRun(run_id)).toBe(false);
    expect((await redis.keys(`${record}*`)).sort()).toEqual([record, `${record}:archive`]);
    expect(await readings(client, store, run_id)).toEqual(compacted);
  });

  it('returns the same run to an idempotent enqueue repeated after compaction', async () => {
    const { client, run_id, request } = await finishedRun('compact-idempotent');
    expect(await client.enqueue(request)).toEqual({ run_id, created: false });
  });

  it('writes nothing when the run changed between its read and its compaction, nor for a run not ended', async () => {
    const { store, run_id, record } = await finishedRun('compact-guard');
    await writeTheOldWay(redis, record);
    const scripts = storeScripts(redis);
    const [dumped, size] = (await scripts.dumpRun([record], [])) as [number, number];
    expect(dumped).toBe(1);
    await redis.sadd(`${record}:keys`, `${record}:late`);
    expect(await scripts.compactRun([record], ['x', 'd1', size])).toBe(0);
    expect(await redis.hget(record, 'archived')).toBeNull();
    expect(await redis.exists(`${record}:archive`)).toBe(0);
    await redis.srem(`${record}:keys`, `${record}:late`);
    await redis.hset(record, 'status', 'running');
    expect(await store.compactRun(run_id)).toBe(false);
    await redis.hset(record, 'status', 'completed');
    expect(await store.compactRun(run_id)).toBe(true);
  });

  it("names no job for a round whose stored calls another process overwrote, and the other rounds' jobs still", () => {
    const calls = (id: string) => JSON.stringify([[id, 'lookup', 'a'.repeat(16)]]);
    const flat = [':pending', 'hash', ['s1|1|calls', 'not json', 's1|2|calls', '{"a":1}', 's1|3|calls', calls('c3')]];
    expect(runJobs('{t}', 'run_x', undefined, flat)).toEqual([`{t}:${QueueName.tool('lookup', 'a'.repeat(16))}`, JobId.tool('run_x', 's1', 3, 'c3')]);
  });

  it("removes the run's finished jobs from whichever finished set holds them, and leaves a job still held", async () => {
    const { store, run_id, record } = await finishedRun('compact-jobs');
    await writeTheOldWay(redis, record);
    const [, , flat] = (await storeScripts(redis).dumpRun([record], [])) as [number, number, unknown[]];
    const jobs = runJobs(store.keys.tagOf(run_id), run_id, 'keeper', flat);
    // Three provider jobs and three tool jobs: the first of each kind failed, the last held, the rest completed.
    expect(jobs.length).toBe(12);
    const [queueOf, idOf] = [(at: number) => jobs[2 * at]!, (at: number) => jobs[2 * at + 1]!];
    const place = (at: number) => (at === 0 || at === 3 ? 'failed' : at === 5 ? 'held' : 'completed');
    for (let at = 0; at < 6; at += 1) {
      await redis.hset(`${queueOf(at)}:${idOf(at)}`, 'name', 'job');
      await redis.rpush(`${queueOf(at)}:${idOf(at)}:logs`, 'line');
      if (place(at) !== 'held') await redis.zadd(`${queueOf(at)}:${place(at)}`, 1, idOf(at));
    }
    expect(await store.compactRun(run_id)).toBe(true);
    for (let at = 0; at < 6; at += 1) {
      expect(await redis.exists(`${queueOf(at)}:${idOf(at)}`, `${queueOf(at)}:${idOf(at)}:logs`)).toBe(place(at) === 'held' ? 2 : 0);
      expect(await redis.zscore(`${queueOf(at)}:completed`, idOf(at))).toBeNull();
      expect(await redis.zscore(`${queueOf(at)}:failed`, idOf(at))).toBeNull();
    }
  });

  it('answers an approval and a result from outside again the same after its run is compacted (SPEC §20: the first answer)', async () => {
    const prefix = testPrefix('compact-waits');
    prefixes.push(prefix);
    const refund = tool({ name: 'refund', description: 'refunds', input_schema: { type: 'object' }, needs_approval: true, handler: () => 'refunded' });
    const locate = tool({ name: 'get_location', description: 'from the browser', input_schema: { type: 'object' } });
    const provider = scriptedProvider([
      toolCalls([{ name: 'refund', args: {}, id: 'c_refund' }]),
      toolCalls([{ name: 'get_location', args: {}, id: 'c_loc' }]),
      reply('refunded it'),
    ]) as ModelProvider;
    const worker = await startWorker({ agents: [new Agent({ name: 'clerk', tools: [refund, locate] })], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger });
    open.push(worker);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'clerk', input: 'refund it' });
    await until(async () => (await client.get(run_id))?.status === 'waiting');
    const resolution = await client.approve(run_id, 'c_refund', { approved: true, by: 'alice' });
    await until(async () => ((await client.get(run_id))?.pending_tool_results ?? []).length === 1);
    const answer = await client.submitToolResult(run_id, 'c_loc', { output: 'Oslo' });
    expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
    const store = new RunStore(redis, prefix, 60);
    const record = store.keys.record(run_id);
    await until(async () => (await redis.hget(record, 'archived')) !== null);
    expect(await redis.exists(`${record}:approvals`, `${record}:tool-results`)).toBe(0);
    expect(await client.approve(run_id, 'c_refund', { approved: false, reason: 'too late' })).toEqual(resolution);
    expect(await client.submitToolResult(run_id, 'c_loc', { error: 'too late' })).toEqual(answer);
    expect(await store.toolResults.statusAt(run_id, 'c_loc', { step_id: 's1', iteration: 2 })).toBe('answered');
    await expect(client.approve(run_id, 'c_never', { approved: true })).rejects.toMatchObject({ code: 'not_pending' });
    await expect(client.submitToolResult(run_id, 'c_never', { output: 'x' })).rejects.toMatchObject({ code: 'not_waiting' });
    await expect(client.submitToolResult(run_id, 'c_refund', { output: 'x' })).rejects.toMatchObject({ code: 'not_waiting' });
  });

  it('forks a compacted finished run the same as the run written the old way (issue 53)', async () => {
    const { client, provider, run_id, record } = await finishedRun('compact-fork');
    const forkAt = async (iteration: number) => {
      const calls = provider.requests.length;
      const fork = await client.fork(run_id, { from: { iteration } });
      const run = await client.wait(fork.run_id, { timeout_ms: 20_000 });
      const { messages } = await client.messages(fork.run_id);
      return { run: { status: run.status, output: run.output, forked_from: run.forked_from, iterations: run.iterations }, messages, live: provider.requests.length - calls };
    };
    expect(await redis.hget(record, 'archived')).not.toBeNull();
    const compacted = [await forkAt(3), await forkAt(2)];
    expect(compacted[0]).toMatchObject({ run: { status: 'completed', output: 'all echoed', forked_from: { run_id, step_id: 's1', iteration: 3 }, iterations: 1 }, live: 1 });
    expect(compacted[0]!.messages).toEqual((await client.messages(run_id)).messages);
    expect(compacted[1]).toMatchObject({ run: { status: 'completed', output: 'all echoed', forked_from: { iteration: 2 } }, live: 1 });
    await writeTheOldWay(redis, record);
    expect([await forkAt(3), await forkAt(2)]).toEqual(compacted);
  });

  it('retries a compacted failed run from where it stopped, once (SPEC §15)', async () => {
    const prefix = testPrefix('compact-retry');
    prefixes.push(prefix);
    const provider = scriptedProvider([
      toolCalls([{ name: 'echo', args: { text: 'a' }, id: 'c_a' }]),
      new ProviderFailure('bad_request', 'down', { retryable: false }),
      reply('echoed it'),
    ]);
    const worker = await startWorker({ agents: [new Agent({ name: 'keeper', tools: [echo] })], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger });
    open.push(worker);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'keeper', input: 'echo a' });
    expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('failed');
    const record = new RunStore(redis, prefix, 60).keys.record(run_id);
    await until(async () => (await redis.hget(record, 'archived')) !== null);
    const retried = await client.retry(run_id);
    const run = await client.wait(retried.run_id, { timeout_ms: 20_000 });
    expect(run).toMatchObject({ status: 'completed', output: 'echoed it', forked_from: { run_id, step_id: 's1', iteration: 2 }, iterations: 1 });
    expect(provider.requests).toHaveLength(3);
    expect((await client.messages(retried.run_id)).messages.map((message) => message.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect((await client.get(run_id))!.retried_by).toBe(retried.run_id);
    expect(await client.retry(run_id)).toEqual(retried);
  });

  it('leaves every run a SIGKILLed worker ended readable and complete, compacted or not, and compacts one it left', async () => {
    const workers = forTest('compact-kill');
    const worker = await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    open.push(client);
    const store = new RunStore(redis, workers.prefix, 7 * 24 * 3600);
    const ids = await Promise.all(Array.from({ length: 12 }, (_, n) => client.enqueue({ agent: 'load_agent', input: `run ${n}` }).then((run) => run.run_id)));
    // Killed the moment a run's end is written: that run's compaction is under way or not begun.
    await until(async () => (await Promise.all(ids.map((id) => store.status(id)))).some((status) => status === 'completed'), 30_000, 1);
    worker.kill('SIGKILL');
    for (const run_id of ids) {
      if ((await store.status(run_id)) !== 'completed') continue;
      const archived = (await redis.hget(store.keys.record(run_id), 'archived')) !== null;
      const before = await readings(client, store, run_id);
      assertEventInvariants(before.events);
      expect(before.events.at(-1)?.kind).toBe('RunCompleted');
      expect(before.stream.at(-1)).toMatchObject({ type: 'end' });
      expect(before.conversation.length).toBeGreaterThan(2);
      if (archived) continue;
      // One its worker died before compacting: compacted now, it reads the same.
      expect(await store.compactRun(run_id)).toBe(true);
      expect(await readings(client, store, run_id)).toEqual(before);
    }
  });

  it('compacts from another worker, once, a run whose worker was SIGKILLed between its end and its compaction; it reads complete before, during and after', async () => {
    const workers = dyingAtCompaction.forTest('compact-sweep');
    const dying = await workers.start({ env: { ARCFLOW_TEST_DIE_AT_COMPACTION: '1' } });
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    open.push(client);
    const store = new RunStore(redis, workers.prefix, 7 * 24 * 3600);
    const { run_id } = await client.enqueue({ agent: 'load_agent', input: 'one run' });
    expect(await dying.exited).toBe('SIGKILL');
    const record = store.keys.record(run_id);
    const uncompacted = store.keys.uncompactedRunsIn(store.keys.tagOf(run_id));
    expect(await store.status(run_id)).toBe('completed');
    expect(await redis.hget(record, 'archived')).toBeNull();
    const endedAtMs = Number(await redis.zscore(uncompacted, run_id));
    expect(endedAtMs).toBeGreaterThan(0);
    const before = await readings(client, store, run_id);
    assertEventInvariants(before.events);
    expect(before.events.at(-1)?.kind).toBe('RunCompleted');
    expect(before.stream.at(-1)).toMatchObject({ type: 'end' });
    expect(before.conversation.length).toBeGreaterThan(2);
    // Two workers start: whichever sweeps first compacts it; the other finds nothing to do.
    await Promise.all([workers.start(), workers.start()]);
    const during: unknown[] = [];
    await until(
      async () => {
        during.push({ run: await client.get(run_id), events: await collect(client, run_id), messages: await client.messages(run_id) });
        return (await redis.hget(record, 'archived')) !== null;
      },
      40_000,
      25,
    );
    const [seconds] = await redis.time();
    expect(Number(seconds) * 1000 - endedAtMs).toBeLessThan(30_000);
    for (const read of during) expect(read).toEqual({ run: before.run, events: before.events, messages: before.messages });
    expect(await readings(client, store, run_id)).toEqual(before);
    expect(await redis.zscore(uncompacted, run_id)).toBeNull();
    expect(await Promise.all([store.runs.compaction.compaction(run_id), store.runs.compaction.compaction(run_id)])).toEqual(['nothing', 'nothing']);
  });

  it('logs a compaction that failed (run id and error, no content), and the sweep compacts the run later', async () => {
    const prefix = testPrefix('compact-failed');
    prefixes.push(prefix);
    const logger = capturingLogger();
    const compactRun = RunStore.prototype.compactRun;
    RunStore.prototype.compactRun = () => Promise.reject(Object.assign(new Error('LOADING Redis is loading the dataset in memory'), { code: 'LOADING' }));
    try {
      const provider = scriptedProvider([toolCalls([{ name: 'echo', args: { text: 'secret-a' }, id: 'c_a' }]), reply('secret answer')]);
      open.push(await startWorker({ agents: [new Agent({ name: 'keeper', tools: [echo] })], provider, redis: TEST_REDIS_URL, prefix, logger }));
      const client = createClient({ redis: TEST_REDIS_URL, prefix });
      open.push(client);
      const store = new RunStore(redis, prefix, 7 * 24 * 3600);
      const { run_id } = await client.enqueue({ agent: 'keeper', input: 'echo the secret' });
      expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
      await until(async () => logger.lines.some((line) => line.startsWith('compacting an ended run failed')));
      const line = logger.lines.find((entry) => entry.startsWith('compacting an ended run failed'))!;
      expect(line).toContain(run_id);
      expect(line).toContain('"code":"LOADING"');
      expect(line).not.toContain('secret');
      const before = { run: await client.get(run_id), events: await collect(client, run_id), messages: await client.messages(run_id) };
      expect(await redis.hget(store.keys.record(run_id), 'archived')).toBeNull();
      await until(async () => (await redis.hget(store.keys.record(run_id), 'archived')) !== null, 30_000, 50);
      expect({ run: await client.get(run_id), events: await collect(client, run_id), messages: await client.messages(run_id) }).toEqual(before);
    } finally {
      RunStore.prototype.compactRun = compactRun;
    }
  });
});
