import { Agent, ConfigError, type ModelProvider, RequestError, type ToolDefinition, silentLogger, tool, toolDefinitionHash } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { type ArcflowWorker, JobId, QueueName, RunStore, createClient, keysFor, startWorker } from '@arcflow/queue';
import { Queue } from 'bullmq';
import { TEST_REDIS_URL, assertEventInvariants, capturingLogger, reply, scriptedProvider, startFakeOpenAI, testPrefix, toolCall, toolCalls } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { FAST, collect, testResources, until } from './harness.ts';

const { prefixes, open, redis } = testResources();

async function engine(name: string, agents: Agent[], provider: ModelProvider = scriptedProvider([reply('ok')], { repeat: true }), extra: Record<string, unknown> = {}) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  const start = () => startWorker({ agents, provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST, ...extra });
  const worker: ArcflowWorker = await start();
  open.push(worker);
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  return { prefix, worker, client, start };
}

/** A tool whose handler waits for its signal: which calls started, and which were aborted. */
function untilAborted(name: string, options: { concurrency?: number } = {}) {
  const executions: string[] = [];
  const aborted: string[] = [];
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const waits = tool({
    name,
    description: 'waits for its signal',
    input_schema: { type: 'object' },
    timeout_ms: 60_000,
    ...options,
    handler: (_args, ctx) =>
      new Promise((resolve) => {
        executions.push(ctx.tool_call_id);
        started();
        ctx.signal.addEventListener('abort', () => (aborted.push(ctx.tool_call_id), resolve('aborted')));
      }),
  });
  return { tool: waits, executions, aborted, running };
}

function barrier(parties: number, timeoutMs = 5_000) {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return async (): Promise<string> => {
    arrived += 1;
    if (arrived === parties) open();
    const timedOut = new Promise<string>((resolve) => setTimeout(() => resolve('barrier timed out'), timeoutMs));
    return Promise.race([opened.then(() => 'all met'), timedOut]);
  };
}

describe('queue engine', () => {
  it('runs the calls of one turn truly at once (a barrier that opens only when all three started)', async () => {
    const wait = barrier(3);
    const meet = tool({ name: 'meet', description: 'meets', input_schema: { type: 'object' }, handler: () => wait() });
    const model = scriptedProvider([
      toolCalls([
        { name: 'meet', args: { a: 1 } },
        { name: 'meet', args: { a: 2 } },
        { name: 'meet', args: { a: 3 } },
      ]),
      reply('met'),
    ]);
    const { client } = await engine('barrier', [new Agent({ name: 'meeting', tools: [meet] })], model);
    const { run_id } = await client.enqueue({ agent: 'meeting', input: 'go' });
    const run = await client.wait(run_id, { timeout_ms: 20_000 });
    expect(run.status).toBe('completed');
    expect(model.requests[1]?.messages.filter((message) => message.role === 'tool').map((message) => message.content)).toEqual(['all met', 'all met', 'all met']);
  });

  it("runs a dozen calls of one run at once in one worker without a listener warning (they share the run's cancel signal)", async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    try {
      const wait = barrier(12);
      const meet = tool({ name: 'crowd', description: 'meets', input_schema: { type: 'object' }, handler: () => wait() });
      const model = scriptedProvider([toolCalls(Array.from({ length: 12 }, (_, n) => ({ name: 'crowd', args: { n } }))), reply('met')]);
      const { client } = await engine('crowd', [new Agent({ name: 'crowded', tools: [meet] })], model);
      const { run_id } = await client.enqueue({ agent: 'crowded', input: 'go' });
      expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
      expect(model.requests[1]?.messages.filter((message) => message.role === 'tool').map((message) => message.content)).toEqual(Array(12).fill('all met'));
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((warning) => warning.includes('MaxListenersExceeded'))).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('caps a tool at its concurrency across workers', async () => {
    let running = 0;
    let peak = 0;
    const narrow = tool({
      name: 'narrow',
      description: 'one at a time',
      input_schema: { type: 'object' },
      concurrency: 1,
      handler: async () => {
        running += 1;
        peak = Math.max(peak, running);
        await new Promise((resolve) => setTimeout(resolve, 60));
        running -= 1;
        return 'ok';
      },
    });
    const agent = new Agent({ name: 'narrow_agent', tools: [narrow] });
    const model = scriptedProvider([toolCalls([0, 1, 2, 3].map((n) => ({ name: 'narrow', args: { n } }))), reply('done')]);
    const { client, start } = await engine('concurrency', [agent], model);
    open.push(await start());
    const { run_id } = await client.enqueue({ agent: 'narrow_agent', input: 'go' });
    expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
    expect(peak).toBe(1);
  });

  it('pauses the provider that answered 429 for every agent on it (here both agents), for retry_after_seconds, without spending an attempt', async () => {
    const server = await startFakeOpenAI({
      turns: [{ type: 'status', status: 429, headers: { 'retry-after': '1' } }],
      fallback: () => ({ type: 'text', content: 'after the wait' }),
    });
    open.push(server);
    const { client, prefix } = await engine(
      'ratelimit',
      [new Agent({ name: 'limited' }), new Agent({ name: 'neighbour' })],
      openaiProvider({ base_url: server.url, api_key: 'k' }),
      { provider_attempts: 1 },
    );
    const { run_id } = await client.enqueue({ agent: 'limited', input: 'hi' });
    // The provider is paused for every worker of the prefix, by its id.
    let pausedMs = 0;
    for (let tries = 0; tries < 100 && pausedMs <= 0; tries += 1) {
      pausedMs = await redis.pttl(keysFor(prefix).providerPause('openai'));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(pausedMs).toBeGreaterThan(0);
    // The other agent calls the same provider: its call waits out the pause too.
    const neighbour = await client.enqueue({ agent: 'neighbour', input: 'hi' });
    const run = await client.wait(run_id, { timeout_ms: 20_000 });
    expect(run).toMatchObject({ status: 'completed', output: 'after the wait' });
    expect(await client.wait(neighbour.run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', output: 'after the wait' });
    const events = await collect(client, run_id);
    const limited = events.filter((event) => event.kind === 'ProviderRateLimited');
    expect(limited).toEqual([expect.objectContaining({ provider_id: 'openai', retry_after_seconds: 1, attempt: 1 })]);
    const [limitedAt, retriedAt] = events.filter((event) => event.kind === 'ProviderRequestSent').map((event) => event.ts);
    expect(retriedAt! - limitedAt!).toBeGreaterThanOrEqual(900);
    const [neighbourSent] = (await collect(client, neighbour.run_id)).filter((event) => event.kind === 'ProviderRequestSent');
    expect(neighbourSent!.ts - limited[0]!.ts).toBeGreaterThanOrEqual(900);
    expect(server.requests).toHaveLength(3);
  });

  it('shows ProviderRequestSent while a slow model call runs, with the run marked running, and keeps each request before its response', async () => {
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    let calls = 0;
    const slowFirst: ModelProvider = {
      id: 'slow-first',
      defaultModel: 'm',
      async complete() {
        calls += 1;
        if (calls === 1) await answered;
        return calls === 1
          ? {
              content: null,
              finish_reason: 'tool_calls',
              usage: { input: 1, output: 1, total: 2 },
              tool_calls: [{ id: 'c1', type: 'function', function: { name: 'echo', arguments: '{}' } }],
            }
          : { content: 'done', finish_reason: 'stop', usage: { input: 1, output: 1, total: 2 }, tool_calls: [] };
      },
    };
    const echo = tool({ name: 'echo', description: 'echoes', input_schema: { type: 'object' }, handler: () => 'echo' });
    const { client } = await engine('held-write', [new Agent({ name: 'held', tools: [echo] })], slowFirst);
    const { run_id } = await client.enqueue({ agent: 'held', input: 'go' });
    let seen: string[] = [];
    for (let tries = 0; tries < 100 && !seen.includes('ProviderRequestSent'); tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      seen = (await collect(client, run_id)).map((event) => event.kind);
    }
    // The call is still running: its request is in the log, with the run marked running.
    expect(seen).toEqual(['RunEnqueued', 'AgentInvoked', 'ProviderRequestSent']);
    expect((await client.get(run_id))?.status).toBe('running');
    answer();
    expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    const kinds = events.map((event) => event.kind);
    // The second call answered at once: its request still comes first.
    const lastRequest = kinds.lastIndexOf('ProviderRequestSent');
    expect(kinds.slice(lastRequest)).toEqual(['ProviderRequestSent', 'ProviderResponseReceived', 'TokensConsumed', 'AgentResponseReceived', 'RunCompleted']);
    const [firstSent, secondSent] = events.filter((event) => event.kind === 'ProviderRequestSent');
    const secondReceived = events.filter((event) => event.kind === 'ProviderResponseReceived')[1]!;
    expect(secondSent!.ts).toBeLessThanOrEqual(secondReceived.ts);
    expect(firstSent!.ts).toBeLessThanOrEqual(secondSent!.ts);
  });

  it('fails the run after 500 × attempts, each a ProviderError', async () => {
    const server = await startFakeOpenAI({ fallback: () => ({ type: 'status', status: 500 }) });
    open.push(server);
    const logger = capturingLogger();
    const { client } = await engine('fivehundred', [new Agent({ name: 'doomed' })], openaiProvider({ base_url: server.url, api_key: 'k' }), { provider_attempts: 3, logger });
    const { run_id } = await client.enqueue({ agent: 'doomed', input: 'hi' });
    const run = await client.wait(run_id, { timeout_ms: 20_000 });
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ code: 'ProviderError', error_code: 'provider_error' });
    expect(server.requests).toHaveLength(3);
    const events = await collect(client, run_id);
    expect(events.filter((event) => event.kind === 'ProviderError').map((event) => (event as { attempt: number }).attempt)).toEqual([1, 2, 3]);
    expect(events.at(-1)).toMatchObject({ kind: 'RunFailed', error_code: 'provider_error' });
    assertEventInvariants(events);
    // Logged with its status and code, never the body's text.
    const logged = logger.lines.filter((line) => line.startsWith('provider call failed'));
    expect(logged).toHaveLength(3);
    expect(logged[0]).toContain(`"run_id":"${run_id}"`);
    expect(logged[0]).toContain('"error_code":"server_error","status":500');
  });

  it('cancels mid-tool: the handler is aborted, the call ends cancelled once, no further model call', async () => {
    const waiting = untilAborted('waiting');
    const model = scriptedProvider([toolCall('waiting', {}, 'w1'), reply('never')]);
    const { client } = await engine('cancel', [new Agent({ name: 'cancellable', tools: [waiting.tool] })], model);
    const { run_id } = await client.enqueue({ agent: 'cancellable', input: 'go' });
    await waiting.running;
    expect((await client.get(run_id))?.status).toBe('running');
    expect(await client.cancel(run_id)).toEqual({ cancelled: true, status: 'cancelled' });
    const run = await client.wait(run_id, { timeout_ms: 5_000 });
    expect(run.status).toBe('cancelled');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(waiting.aborted).toEqual(['w1']);
    expect(model.requests).toHaveLength(1);
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    expect(events.filter((event) => event.kind === 'ToolCallFailed')).toEqual([expect.objectContaining({ tool_call_id: 'w1', error_code: 'cancelled' })]);
    expect(events.at(-1)?.kind).toBe('RunCancelled');
    expect(await client.cancel(run_id)).toEqual({ cancelled: false, status: 'cancelled' });
  });

  it('cancel closes only the calls still open: not those settled in an earlier round, nor one answered without a job', async () => {
    const waiting = untilAborted('waiting');
    const echo = tool({ name: 'echo', description: 'echoes', input_schema: { type: 'object' }, handler: () => 'echoed' });
    // Round 2 repeats round 1's call (answered at once by loop detection, no job) and fans out one that waits.
    const model = scriptedProvider([
      toolCall('echo', { n: 1 }, 'e1'),
      toolCalls([
        { name: 'echo', args: { n: 1 }, id: 'e2' },
        { name: 'waiting', args: {}, id: 'w1' },
      ]),
      reply('never'),
    ]);
    const agent = new Agent({ name: 'mixed', tools: [echo, waiting.tool], loop_detection: { window: 3, threshold: 2, action: 'inject' } });
    const { client } = await engine('cancel-mixed', [agent], model);
    const { run_id } = await client.enqueue({ agent: 'mixed', input: 'go' });
    await waiting.running;
    expect(await client.cancel(run_id)).toEqual({ cancelled: true, status: 'cancelled' });
    expect((await client.wait(run_id, { timeout_ms: 5_000 })).status).toBe('cancelled');
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    const terminal = (id: string) => events.filter((event) => 'tool_call_id' in event && event.tool_call_id === id && event.kind !== 'ToolCallStarted').map((event) => event.kind);
    expect(terminal('e1')).toEqual(['ToolCallCompleted']);
    expect(terminal('e2')).toEqual(['LoopDetected']);
    expect(terminal('w1')).toEqual(['ToolCallFailed']);
  });

  it("cancel removes the run's queued tool jobs: a call waiting behind the tool's concurrency cap never runs", async () => {
    const single = untilAborted('single', { concurrency: 1 });
    const executions = single.executions;
    const model = scriptedProvider([
      toolCalls([
        { name: 'single', args: { n: 1 }, id: 'a' },
        { name: 'single', args: { n: 2 }, id: 'b' },
      ]),
      reply('never'),
    ]);
    const { client, prefix } = await engine('cancel-queued', [new Agent({ name: 'queued', tools: [single.tool] })], model);
    const { run_id } = await client.enqueue({ agent: 'queued', input: 'go' });
    await single.running;
    const queue = new Queue(QueueName.tool('single', toolDefinitionHash(single.tool)), { connection: redis, prefix: keysFor(prefix).tag });
    open.push(queue);
    const waitingJob = JobId.tool(run_id, 's1', 1, executions[0] === 'a' ? 'b' : 'a');
    // Queued behind its tenant's turn: every job carries the priority fair scheduling gave it (SPEC §14).
    expect(await queue.getJobState(waitingJob)).toBe('prioritized');
    expect(await client.cancel(run_id)).toEqual({ cancelled: true, status: 'cancelled' });
    expect(await queue.getJob(waitingJob)).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(executions).toHaveLength(1);
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    expect(events.filter((event) => event.kind === 'ToolCallStarted')).toHaveLength(1);
    expect(events.filter((event) => event.kind === 'ToolCallFailed').map((event) => (event as { error_code: string }).error_code)).toEqual(['cancelled', 'cancelled']);
  });

  it('tool jobs first delivered after their run ended unheard of run no handler and write nothing', async () => {
    const late = untilAborted('late');
    const instantRuns: string[] = [];
    const instant = tool({
      name: 'instant',
      description: 'answers at once',
      input_schema: { type: 'object' },
      handler: (_args, ctx) => (instantRuns.push(ctx.tool_call_id), 'done'),
    });
    const agent = new Agent({ name: 'unheard', tools: [late.tool, instant] });
    const model = scriptedProvider([
      toolCalls([
        { name: 'late', args: {}, id: 'l1' },
        { name: 'instant', args: {}, id: 'i1' },
      ]),
      reply('never'),
    ]);
    const { prefix, client } = await engine('cancel-unheard', [agent], model, { roles: ['provider'] });
    const { run_id } = await client.enqueue({ agent: 'unheard', input: 'go' });
    const store = new RunStore(redis, prefix, 60);
    // Fanned out, the tool jobs wait: no worker serves their queues yet.
    await until(async () => (await redis.hget(store.keys.run(run_id).pending, 's1|1')) === '2');
    // Ended in the store alone: no cancel message, the jobs stay queued.
    expect((await store.finishRun(run_id, { outcome: { status: 'cancelled' }, step_id: 's1' })).ended).toBe(true);
    const tools = await startWorker({ agents: [agent], roles: ['tools'], redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
    open.push(tools);
    // Both attempts finish their jobs (and write whatever they would write).
    for (const [definition, id] of [
      [late.tool, 'l1'],
      [instant, 'i1'],
    ] as const) {
      const queue = new Queue(QueueName.tool(definition.name, toolDefinitionHash(definition)), { connection: redis, prefix: keysFor(prefix).tag });
      open.push(queue);
      await until(async () => (await queue.getJobState(JobId.tool(run_id, 's1', 1, id))) === 'completed');
    }
    // The status read before a first delivery's handler finds the run ended: neither handler starts.
    expect(late.aborted).toEqual([]);
    expect(instantRuns).toEqual([]);
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    expect(events.filter((event) => event.kind === 'ToolCallStarted')).toHaveLength(0);
    expect(events.filter((event) => event.kind === 'ToolCallFailed').map((event) => (event as { error_code: string }).error_code)).toEqual(['cancelled', 'cancelled']);
    expect(events.at(-1)?.kind).toBe('RunCancelled');
  });

  it('returns the same run for a repeated idempotency key and runs it once', async () => {
    const model = scriptedProvider([reply('once')], { repeat: true });
    const { client } = await engine('idempotent', [new Agent({ name: 'once' })], model);
    const first = await client.enqueue({ agent: 'once', input: 'hi', idempotency_key: 'order-123' });
    const second = await client.enqueue({ agent: 'once', input: 'hi', idempotency_key: 'order-123' });
    expect(second).toEqual({ run_id: first.run_id, created: false });
    expect((await client.wait(first.run_id, { timeout_ms: 10_000 })).output).toBe('once');
    await client.enqueue({ agent: 'once', input: 'hi', idempotency_key: 'order-123' });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(model.requests).toHaveLength(1);
  });

  it('refuses unknown agents, invalid configs and oversize input at once, queueing nothing', async () => {
    const { client, prefix } = await engine('refuse', [new Agent({ name: 'known' })]);
    const keysBefore = await redis.keys(`{${prefix}}:run:*`);
    await expect(client.enqueue({ agent: 'nope', input: 'hi' })).rejects.toThrow(RequestError);
    await expect(client.enqueue({ agent: 'nope', input: 'hi' })).rejects.toThrow("unknown agent 'nope'");
    await expect(client.enqueue({ agent: 'known', input: 'hi', config: { tool_execution: { max_iterations: 0 } } })).rejects.toThrow(ConfigError);
    await expect(client.enqueue({ agent: 'known', input: 'hi', config: { tool_execution: { max_iterations: 0 } } })).rejects.toThrow(/max_iterations/);
    // The code HTTP answers the same refusal with (SPEC §8).
    await expect(client.enqueue({ agent: 'known', input: 'hi', config: { tool_execution: { max_iterations: 0 } } })).rejects.toMatchObject({ code: 'invalid_config' });
    await expect(client.enqueue({ agent: 'known', input: 'x'.repeat(300_000) })).rejects.toThrow(/input is 300000 bytes/);
    await expect(client.enqueue({ agent: 'known', input: 'hi', exec_config: { test: { steps: { s1: {} } } } })).rejects.toThrow(/exec_config/);
    expect(await redis.keys(`{${prefix}}:run:*`)).toEqual(keysBefore);
    expect(await redis.keys(`{${prefix}}:agent-*:run_*`)).toEqual([]);
  });

  it('expires every key of a finished run after the retention period', async () => {
    const echo = tool({ name: 'echo', description: 'echoes', input_schema: { type: 'object' }, handler: () => 'echoed' });
    // One executed call and one rejected (unknown tool) in round 1, then the answer.
    const model = scriptedProvider([
      toolCalls([
        { name: 'echo', args: {} },
        { name: 'nope', args: {} },
      ]),
      reply('done'),
    ]);
    const { client, prefix } = await engine('retention', [new Agent({ name: 'brief', tools: [echo] })], model, { retention_seconds: 3600 });
    const { run_id } = await client.enqueue({ agent: 'brief', input: 'hi' });
    expect((await client.wait(run_id, { timeout_ms: 10_000 })).status).toBe('completed');
    const keys = keysFor(prefix).run(run_id);
    // Compacted when it ended (docs/decisions/0031-compaction.md): its record and its archive.
    await until(async () => (await redis.hget(keys.record, 'archived')) !== null);
    const stored = await redis.keys(`${keys.record}*`);
    expect(stored.sort()).toEqual([keys.record, keys.archive]);
    for (const key of stored) {
      const ttl = await redis.ttl(key);
      expect(ttl, key).toBeGreaterThan(3500);
      expect(ttl, key).toBeLessThanOrEqual(3600);
    }
    expect(await client.events(run_id)[Symbol.asyncIterator]().next()).toMatchObject({ value: { kind: 'RunEnqueued' } });
  });

  it("removes an ended run's finished jobs with its compaction, the job that ended it when it completes", async () => {
    const echo = tool({ name: 'echo', description: 'echoes', input_schema: { type: 'object' }, handler: () => 'echoed' });
    const model = scriptedProvider([toolCall('echo', {}), reply('done')]);
    const { client, prefix } = await engine('job-retention', [new Agent({ name: 'echoer', tools: [echo] })], model);
    const { run_id } = await client.enqueue({ agent: 'echoer', input: 'one' });
    expect((await client.wait(run_id, { timeout_ms: 10_000 })).status).toBe('completed');
    // Two provider jobs and one tool job, and their entries in their queues' completed sets.
    await until(async () => (await redis.keys(`{${prefix}}:*:${run_id}.*`)).length === 0);
    for (const queue of ['agent-echoer', `tool-echo-${toolDefinitionHash(echo)}`]) expect(await redis.zrange(`{${prefix}}:${queue}:completed`, 0, -1)).toEqual([]);
  });

  it('refuses a worker whose tools share a name but not a definition', async () => {
    const make = (): ToolDefinition => tool({ name: 'same', description: '', input_schema: { type: 'object' }, handler: () => '' });
    await expect(
      startWorker({
        agents: [new Agent({ name: 'a1', tools: [make()] }), new Agent({ name: 'a2', tools: [make()] })],
        provider: scriptedProvider([]),
        redis: TEST_REDIS_URL,
        prefix: testPrefix('dup'),
      }),
    ).rejects.toThrow("two different tools are named 'same'");
  });
});
