import { Agent, initialStepState, silentLogger, tool } from '@arcflow/core';
import { JobId, QueueName, RunStore, createClient, keysFor, startWorker } from '@arcflow/queue';
import { Queue } from 'bullmq';
import { TEST_REDIS_URL, type ScriptedProvider, capturingLogger, reply, scriptedProvider, testPrefix, toolCall } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { FAST, testResources } from './harness.ts';

const { prefixes, open, redis } = testResources();

const echo = (name: string) => tool({ name, description: name, input_schema: { type: 'object' }, handler: () => `${name} done` });
const research = new Agent({ name: 'fleet_research', instructions: 'research', tools: [echo('fleet_search')] });
const billing = new Agent({ name: 'fleet_billing', instructions: 'billing', tools: [echo('fleet_refund')] });

/** A model that calls the agent's one tool, then answers; it keeps every request it saw. */
function model(): ScriptedProvider {
  return scriptedProvider(
    [
      (request) => {
        const answered = request.messages.some((message) => message.role === 'tool');
        return answered ? reply('done') : toolCall(request.tools[0]!.name, {});
      },
    ],
    { repeat: true },
  );
}

/** Which agents' instructions a provider was asked about. */
const agentsSeen = (provider: ScriptedProvider) => new Set(provider.requests.map((request) => (request.messages[0] as { content: string }).content));

describe('mixed fleets on one prefix', () => {
  it('gives each worker only the jobs of agents it serves: disjoint and overlapping modules, 50 runs of each agent', async () => {
    const prefix = testPrefix('fleet');
    prefixes.push(prefix);
    const start = async (agents: Agent[]) => {
      const provider = model();
      open.push(await startWorker({ agents, provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
      return provider;
    };
    const researchOnly = await start([research]);
    const billingOnly = await start([billing]);
    const both = await start([research, billing]);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const enqueued = await Promise.all(
      Array.from({ length: 100 }, (_, index) => client.enqueue({ agent: index % 2 === 0 ? 'fleet_research' : 'fleet_billing', input: `run ${index}` })),
    );
    const runs = await Promise.all(enqueued.map(({ run_id }) => client.wait(run_id, { timeout_ms: 30_000 })));
    expect(runs.filter((run) => run.status !== 'completed')).toEqual([]);
    expect(agentsSeen(researchOnly)).toEqual(new Set(['research']));
    expect(agentsSeen(billingOnly)).toEqual(new Set(['billing']));
    // Every provider call was made by a worker serving the run's agent: two per run, 200 in all.
    expect(researchOnly.requests.length + billingOnly.requests.length + both.requests.length).toBe(200);
  });

  it('keeps a run waiting while no worker serves its agent, though other workers are up, and runs it when one starts', async () => {
    const prefix = testPrefix('fleet-wait');
    prefixes.push(prefix);
    // Registers the agent, then goes away (a rolling deploy, scale to zero).
    await (await startWorker({ agents: [billing], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST })).close();
    open.push(await startWorker({ agents: [research], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'fleet_billing', input: 'refund order 7' });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await client.get(run_id)).toMatchObject({ status: 'queued' });
    open.push(await startWorker({ agents: [billing], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
    expect(await client.wait(run_id, { timeout_ms: 15_000 })).toMatchObject({ status: 'completed', output: 'done' });
  });
});

describe('a rolling deploy', () => {
  it('continues runs in flight on workers whose agent changed (a new tool, a new max_iterations), each run saying so once', async () => {
    const prefix = testPrefix('rolling');
    prefixes.push(prefix);
    const slow = tool({
      name: 'rolling_slow',
      description: 'slow',
      input_schema: { type: 'object' },
      handler: () => new Promise((resolve) => setTimeout(() => resolve('slow done'), 300)),
    });
    const v1 = new Agent({ name: 'rolling', instructions: 'v1', tools: [slow], tool_execution: { max_iterations: 4 } });
    const v2 = new Agent({ name: 'rolling', instructions: 'v1', tools: [slow, echo('rolling_new')], tool_execution: { max_iterations: 6 } });
    expect(v2.definition_hash).not.toBe(v1.definition_hash);
    const first = await startWorker({ agents: [v1], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const ids = (await Promise.all(Array.from({ length: 10 }, (_, index) => client.enqueue({ agent: 'rolling', input: `run ${index}` })))).map(({ run_id }) => run_id);
    // Every run has started its first round on the old worker; then the worker is replaced.
    for (const run_id of ids) {
      for (let tries = 0; tries < 200; tries += 1) {
        const kinds = [];
        for await (const event of client.events(run_id)) kinds.push(event.kind);
        if (kinds.includes('ToolCallStarted')) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    open.push(await startWorker({ agents: [v2], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
    await first.close();
    const runs = await Promise.all(ids.map((run_id) => client.wait(run_id, { timeout_ms: 20_000 })));
    expect(runs.map((run) => run.status)).toEqual(ids.map(() => 'completed'));
    for (const run_id of ids) {
      const changes = [];
      for await (const event of client.events(run_id)) if (event.kind === 'DefinitionChanged') changes.push(event);
      expect(changes).toEqual([expect.objectContaining({ previous_hash: v1.definition_hash, current_hash: v2.definition_hash })]);
    }
  });
});

describe('decisions recorded with the response', () => {
  it('folds a round as it was decided, even when the new definition would decide it otherwise (max_iterations lowered to 1)', async () => {
    const prefix = testPrefix('recorded-plan');
    prefixes.push(prefix);
    const gate = { open: false };
    const held = tool({
      name: 'held',
      description: 'waits for the gate',
      input_schema: { type: 'object' },
      handler: async () => {
        while (!gate.open) await new Promise((resolve) => setTimeout(resolve, 10));
        return 'released';
      },
    });
    const before = new Agent({ name: 'replanned', tools: [held], tool_execution: { max_iterations: 4 } });
    const after = new Agent({ name: 'replanned', tools: [held], tool_execution: { max_iterations: 1 } });
    const first = await startWorker({ agents: [before], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'replanned', input: 'go' });
    for (let tries = 0; tries < 200; tries += 1) {
      const kinds = [];
      for await (const event of client.events(run_id)) kinds.push(event.kind);
      if (kinds.includes('ToolCallStarted')) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // The join runs on the new definition, whose max_iterations would have refused round 1.
    open.push(await startWorker({ agents: [after], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST, roles: ['provider'] }));
    const closing = first.close();
    gate.open = true;
    await closing;
    open.push(await startWorker({ agents: [after], redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST, roles: ['tools'] }));
    expect(await client.wait(run_id, { timeout_ms: 15_000 })).toMatchObject({ status: 'completed', output: 'done', iterations: 2 });
  });
});

describe('a re-delivered provider job after a deploy', () => {
  it('follows the plan recorded with the response: a call rejected then but runnable now is closed, not fanned out, and the round joins', async () => {
    const prefix = testPrefix('redelivered');
    prefixes.push(prefix);
    // Now the agent has the tool; when the response was recorded, it did not (the call was answered as unknown).
    const grown = new Agent({ name: 'grown', tools: [echo('added_later')] });
    await (await startWorker({ agents: [grown], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST })).close();
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'grown', input: 'go' });
    // What the first delivery of provider job 1 left before its worker died: state, and response 1 with its plan.
    const store = new RunStore(redis, prefix, 60);
    expect(await store.saveState(run_id, initialStepState(grown, 'go', 's1'), -1, [], true)).toBe('saved');
    const response = toolCall('added_later', {}, 'late1');
    const recorded = { response, plan: { type: 'tools' as const, calls: [{ index: 0, action: 'reject' as const, signature: 'x', fanned_out: false }] } };
    expect(await store.recordResponse(run_id, 's1', 1, recorded, [])).toMatchObject({ recordedNow: true });
    const logger = capturingLogger();
    open.push(await startWorker({ agents: [grown], provider: model(), redis: TEST_REDIS_URL, prefix, logger, ...FAST }));
    expect(await client.wait(run_id, { timeout_ms: 10_000 })).toMatchObject({ status: 'completed', output: 'done' });
    const events = [];
    for await (const event of client.events(run_id)) events.push(event);
    expect(events.filter((event) => event.kind === 'ToolCallFailed')).toEqual([expect.objectContaining({ tool_call_id: 'late1', error_code: 'tool_error' })]);
    expect(events.some((event) => event.kind === 'ToolCallStarted')).toBe(false);
    expect(logger.lines.some((line) => line.startsWith('this worker decides a recorded response differently'))).toBe(true);
  });
});

describe('stored formats', () => {
  /**
   * Runs whose step state holds the given stored texts (written before any worker took them), and
   * a worker started on them afterwards, logging to `logger`.
   */
  async function runsStoredAs(name: string, states: readonly string[]) {
    return runsDamaged(
      name,
      states.map((state) => (record: string) => redis.hset(`${record}:s1:state`, 'iterations', 0, 'json', state)),
    );
  }

  /** Runs enqueued with no worker about, each then damaged by one of `damages` (given its record's key), and a worker started on them afterwards. */
  async function runsDamaged(name: string, damages: readonly ((record: string) => Promise<unknown>)[]) {
    const prefix = testPrefix(name);
    prefixes.push(prefix);
    await (await startWorker({ agents: [billing], provider: model(), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST })).close();
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const run_ids: string[] = [];
    for (const damage of damages) {
      const { run_id } = await client.enqueue({ agent: 'fleet_billing', input: 'refund' });
      await damage(keysFor(prefix).record(run_id));
      run_ids.push(run_id);
    }
    const logger = capturingLogger();
    open.push(await startWorker({ agents: [billing], provider: model(), redis: TEST_REDIS_URL, prefix, logger, ...FAST }));
    return { prefix, client, run_ids, logger };
  }

  it('refuses a run stored in a format this worker cannot read, with a clear error and no write, leaving its job for another worker', async () => {
    // What a newer arcflow might have left: a step state of format 99.
    const { prefix, client, run_ids, logger } = await runsStoredAs('format', [JSON.stringify({ v: 99, state: {} })]);
    const run_id = run_ids[0]!;
    const queue = new Queue(QueueName.agent('fleet_billing'), { connection: redis, prefix: keysFor(prefix).tag });
    open.push(queue);
    for (let tries = 0; tries < 200 && (await queue.getJobState(JobId.provider(run_id, 's1', 1))) !== 'delayed'; tries += 1)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await queue.getJobState(JobId.provider(run_id, 's1', 1))).toBe('delayed');
    expect(logger.lines.find((line) => line.startsWith('run stored in a format this worker cannot read'))).toContain(
      `state of ${run_id}/s1 is stored in format 99; this worker reads formats 2 to 6`,
    );
    const kinds = [];
    for await (const event of client.events(run_id)) kinds.push(event.kind);
    expect(kinds).toEqual(['RunEnqueued']);
    expect(await client.get(run_id)).toMatchObject({ status: 'queued' });
  });

  it('fails a run whose stored state no version could read (not JSON, or no format), instead of leaving it queued', async () => {
    const {
      client,
      run_ids: [garbled, formatless],
      logger,
    } = await runsStoredAs('format-corrupt', ['{"v":2,"state":', JSON.stringify({ state: {} })]);
    for (const [run_id, found] of [
      [garbled!, '"unparseable"'],
      [formatless!, 'no format'],
    ] as const) {
      const run = await client.wait(run_id, { timeout_ms: 10_000 });
      expect(run).toMatchObject({
        status: 'failed',
        error: { code: 'StepExecutionFailed', error_code: 'unreadable_state', message: `state of ${run_id}/s1 cannot be read (${found}); the run cannot go on` },
      });
      const events = [];
      for await (const event of client.events(run_id)) events.push(event);
      expect(events.map((event) => event.kind)).toEqual(['RunEnqueued', 'StepExecutionFailed', 'RunFailed']);
    }
    expect(logger.lines.filter((line) => line.startsWith('run stored unreadably; failing it'))).toHaveLength(2);
  });

  it("runs a run whose record's tenant or priority another process overwrote as the default tenant's, at the default priority", async () => {
    const { client, run_ids } = await runsDamaged('owner-corrupt', [
      (record) => redis.hset(record, 'priority', 'zz'),
      (record) => redis.hset(record, 'priority', '99'),
      (record) => redis.hset(record, 'tenant', 'not a tenant!'),
    ]);
    for (const run_id of run_ids) {
      const run = await client.wait(run_id, { timeout_ms: 10_000 });
      expect(run.status).toBe('completed');
      expect(run).not.toHaveProperty('priority');
      expect(run).not.toHaveProperty('tenant');
    }
  });

  it('fails a run whose record lacks its agent or holds config that is not JSON, at once, naming what cannot be read', async () => {
    const { client, run_ids, prefix } = await runsDamaged('record-corrupt', [
      (record) => redis.hdel(record, 'agent'),
      (record) => redis.hset(record, 'config', 'not json'),
      (record) => redis.hset(record, 'exec_config', '{'),
    ]);
    const [agentless, configless, execless] = run_ids as [string, string, string];
    for (const [run_id, what, found] of [
      [agentless, `agent of run ${agentless}`, '"missing"'],
      [configless, `config of run ${configless}`, '"malformed"'],
      [execless, `exec_config of run ${execless}`, '"malformed"'],
    ] as const) {
      const run = await client.wait(run_id, { timeout_ms: 10_000 });
      expect(run).toMatchObject({ status: 'failed', error: { error_code: 'unreadable_state', message: `${what} cannot be read (${found}); the run cannot go on` } });
      // Ended whole: off the watchdog's scan, not only marked failed.
      const keys = keysFor(prefix);
      expect(await redis.zscore(keys.activeRunsIn(keys.tagOf(run_id)), run_id)).toBeNull();
    }
  });
});
