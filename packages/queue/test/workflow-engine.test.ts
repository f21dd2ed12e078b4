import { Agent, ConfigError, type ModelProvider, Workflow, silentLogger, tool } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, assertWorkflowInvariants, reply, scriptedProvider, testPrefix, toolCall } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { RunStore } from '../src/runs/run-store.ts';
import { WorkflowScheduler } from '../src/workflows/workflow-scheduler.ts';
import { Dispatcher } from '../src/jobs/dispatcher.ts';
import { JobId, keysFor } from '../src/redis/keys.ts';
import { collect, jobEvents, testResources, until } from './harness.ts';

const { prefixes, open, redis } = testResources();
const FAST = { lock_duration_ms: 2_000, stalled_interval_ms: 1_000, heartbeat_ms: 500 };

function prefixFor(name: string): string {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  return prefix;
}

async function serve(prefix: string, definitions: (Agent | Workflow)[]) {
  const worker = await startWorker({ agents: definitions, provider: scriptedProvider([], { repeat: false }), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
  open.push(worker);
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  return client;
}

describe('a run-wide budget shared by parallel steps', () => {
  it('executes no call past max_tool_calls when two steps answered at the same time against the same spend', async () => {
    const prefix = prefixFor('wf-budget-race');
    let executed = 0;
    const probe = tool({ name: 'race_probe', description: 'counts', input_schema: { type: 'object' }, handler: () => `probed ${++executed}` });
    // Both steps' first calls are answered together, once both have arrived: each is decided against the same spend.
    let arrived = 0;
    let release: () => void = () => undefined;
    const together = new Promise<void>((resolve) => (release = resolve));
    const provider: ModelProvider = {
      id: 'barrier',
      defaultModel: 'barrier-model',
      async complete(request) {
        if (request.messages.some((message) => message.role === 'tool')) return reply('done');
        arrived += 1;
        if (arrived === 2) release();
        await together;
        return toolCall('race_probe', {});
      },
    };
    const agent = new Agent({ name: 'race_agent', tools: [probe] });
    const flow = new Workflow({
      name: 'race_flow',
      steps: [
        { id: 'left', agent },
        { id: 'right', agent },
      ],
    });
    const worker = await startWorker({ agents: [flow], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST });
    open.push(worker);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const { run_id } = await client.enqueue({ agent: 'race_flow', input: 'go', config: { budget: { max_tool_calls: 1 } } });
    const run = await client.wait(run_id, { timeout_ms: 20_000 });
    expect(executed).toBe(1);
    expect(run.status).toBe('failed');
    expect(
      Object.values(run.steps ?? {})
        .map((step) => step.error?.error_code ?? step.status)
        .sort(),
    ).toEqual(['budget_exceeded', 'completed']);
  });
});

describe('workflow runs on the queue engine', () => {
  it('cancels a workflow run: the running step is cancelled and its handler aborted, the rest skipped, completed sinks kept', async () => {
    let aborted = false;
    let started = false;
    const wait = tool({
      name: 'wait_until_cancelled',
      description: 'waits for its signal',
      input_schema: { type: 'object' },
      timeout_ms: 30_000,
      handler: async (_args: unknown, ctx) => {
        started = true;
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
        aborted = true;
        return 'aborted';
      },
    });
    const quick = tool({ name: 'quick_sink', description: 'answers', input_schema: { type: 'object' }, handler: async () => 'quick output' });
    const workflow = new Workflow({
      name: 'cancel_me',
      steps: [
        { id: 'quick', tool: quick, args: () => ({}) },
        { id: 'long', tool: wait, args: () => ({}) },
        { id: 'after', agent: new Agent({ name: 'after_agent' }), depends_on: ['long'] },
      ],
    });
    const prefix = prefixFor('wf-cancel');
    const client = await serve(prefix, [workflow]);
    const { run_id } = await client.enqueue({ agent: 'cancel_me', input: '{}' });
    await until(async () => started && (await client.get(run_id))?.steps?.quick?.status === 'completed');
    expect(await client.cancel(run_id)).toEqual({ cancelled: true, status: 'cancelled' });
    await until(async () => aborted);
    const run = await client.get(run_id);
    expect(run).toMatchObject({ status: 'cancelled', output: JSON.stringify({ quick: 'quick output' }) });
    expect(run?.steps).toEqual({ quick: { status: 'completed', output: 'quick output' }, long: { status: 'cancelled' }, after: { status: 'skipped' } });
    const events = await collect(client, run_id);
    assertWorkflowInvariants(events);
    expect(events.filter((event) => event.kind === 'StepSkipped')).toEqual([expect.objectContaining({ step_id: 'after', reason: 'cancelled' })]);
    expect(events.find((event) => event.kind === 'ToolCallFailed' && event.step_id === 'long')).toMatchObject({ error_code: 'cancelled' });
    expect(events.at(-1)).toMatchObject({ kind: 'RunCancelled', step_id: 'run' });
  });

  it('registers workflows as their own kind and refuses a worker given an agent and a workflow of one name', async () => {
    const agent = new Agent({ name: 'same_name' });
    const workflow = new Workflow({ name: 'same_name', steps: [{ id: 'one', agent: new Agent({ name: 'inner' }) }] });
    const prefix = prefixFor('wf-registry');
    await expect(startWorker({ agents: [agent, workflow], provider: scriptedProvider([]), redis: TEST_REDIS_URL, prefix, logger: silentLogger })).rejects.toThrow(
      new ConfigError("'same_name' names both an agent and a workflow; agents and workflows share one namespace"),
    );
    const client = await serve(prefix, [workflow]);
    const agents = await client.agents();
    expect(agents.map((entry) => [entry.name, entry.kind])).toEqual([
      ['inner', 'agent'],
      ['same_name', 'workflow'],
    ]);
    await expect(client.enqueue({ agent: 'same_name', input: 'x', config: { steps: { two: {} } } })).rejects.toThrow("config.steps.two: workflow 'same_name' has no step 'two'");
    expect(await client.list()).toEqual({ runs: [] });
  });

  it("expires every key of an ended workflow run with the run's retention", async () => {
    const echo = tool({ name: 'echo_step', description: 'echo', input_schema: { type: 'object' }, handler: async () => 'echoed' });
    const workflow = new Workflow({
      name: 'retained',
      steps: [
        { id: 'first', tool: echo, args: () => ({}) },
        { id: 'second', agent: new Agent({ name: 'second_agent' }), depends_on: ['first'] },
      ],
    });
    const prefix = prefixFor('wf-retention');
    const client = await serve(prefix, [workflow]);
    const { run_id } = await client.enqueue({ agent: 'retained', input: '{}', exec_config: { test: { steps: { second: { output: 'done' } } } } });
    expect((await client.wait(run_id, { timeout_ms: 10_000 })).status).toBe('completed');
    // Compacted after its end (docs/decisions/0031-compaction.md): its record and its archive, both expiring.
    const record = `{${prefix}}:run:${run_id}`;
    await until(async () => (await redis.hget(record, 'archived')) !== null);
    const keys = await redis.keys(`${record}*`);
    expect(keys.sort()).toEqual([record, `${record}:archive`]);
    for (const key of keys) expect(await redis.ttl(key)).toBeGreaterThan(0);
    expect((await client.get(run_id))?.steps).toEqual({ first: { status: 'completed', output: 'echoed' }, second: { status: 'completed', output: 'done' } });
  });

  it("waits for approval inside a workflow's agent step, and shares the run's budget", async () => {
    let refunds = 0;
    const refund = tool({
      name: 'wf_refund',
      description: 'refund',
      input_schema: { type: 'object' },
      needs_approval: true,
      handler: async () => {
        refunds += 1;
        return 'refunded';
      },
    });
    const clerk = new Agent({ name: 'wf_clerk', tools: [refund] });
    const workflow = new Workflow({
      name: 'approval_flow',
      steps: [
        { id: 'ask', agent: clerk },
        { id: 'after', agent: clerk, depends_on: ['ask'] },
      ],
    });
    const prefix = prefixFor('wf-approval');
    const client = await serve(prefix, [workflow]);
    const turns = { responses: [{ tool_calls: [{ name: 'wf_refund', arguments: {}, id: 'c_wf' }] }, { output: 'asked' }] };
    const { run_id } = await client.enqueue({ agent: 'approval_flow', input: 'go', exec_config: { test: { steps: { ask: turns, after: { output: 'done' } } } } });
    await until(async () => (await client.get(run_id))?.status === 'waiting');
    expect((await client.get(run_id))?.pending_approvals).toEqual([expect.objectContaining({ step_id: 'ask', tool_call_id: 'c_wf' })]);
    expect(refunds).toBe(0);
    await client.approve(run_id, 'c_wf', { approved: true });
    const run = await client.wait(run_id, { timeout_ms: 10_000 });
    expect(run).toMatchObject({ status: 'completed', output: 'done' });
    expect(refunds).toBe(1);
    assertWorkflowInvariants(await collect(client, run_id));
    // Every job of the step stayed on the workflow's queue (a worker serving only its agent never sees them).
    const pool = new Dispatcher(redis, keysFor(prefix));
    open.push(pool);
    expect(await jobEvents(redis, pool.get('agent-approval_flow'), JobId.provider(run_id, 'ask', 2))).toContain('completed');
    expect(await jobEvents(redis, pool.get('agent-wf_clerk'), JobId.provider(run_id, 'ask', 2))).toEqual([]);
  });

  it('starts a step once when its two dependencies are settled at the same moment by two processes', async () => {
    const workflow = new Workflow({
      name: 'race',
      steps: [
        { id: 'left', agent: new Agent({ name: 'left_agent' }) },
        { id: 'right', agent: new Agent({ name: 'right_agent' }) },
        { id: 'join', agent: new Agent({ name: 'join_agent' }), depends_on: ['left', 'right'] },
      ],
    });
    const prefix = prefixFor('wf-race');
    // Two schedulers on two connections, as two workers would be; nobody serves the queue, so the added jobs stay to be counted.
    const connections = [redis.duplicate(), redis.duplicate()];
    open.push({ close: async () => void (await Promise.all(connections.map((connection) => connection.quit()))) });
    const sides = connections.map((connection) => {
      const store = new RunStore(connection, prefix, 60);
      const queues = new Dispatcher(connection, store.keys);
      open.push(queues);
      return { store, queues, scheduler: new WorkflowScheduler({ store, queues, redis: connection, logger: silentLogger }) };
    });
    const queue = { queue: 'agent-race', attempts: 1 };
    for (let round = 0; round < 20; round += 1) {
      const run_id = `run_race${round}`;
      await sides[0]!.store.createRun(
        { run_id, agent: 'race', input: 'go', config: null, exec_config: null, trace: {}, definition_hash: '' },
        undefined,
        { kind: 'RunEnqueued', step_id: 'run', workflow: 'race', steps_count: 3 },
        {
          statuses: [
            ['left', 'running'],
            ['right', 'running'],
            ['join', 'pending'],
          ],
          started: [],
        },
      );
      const run = { run_id, graph: workflow.graph, queue, trace: {} };
      await Promise.all(
        (['left', 'right'] as const).map((step_id, index) => sides[index]!.scheduler.settle(run, { step_id, outcome: { status: 'completed', output: `${step_id} out` } })),
      );
      const events = await sides[0]!.store.events(run_id);
      expect(events.filter((event) => event.kind === 'StepStarted' && event.step_id === 'join')).toHaveLength(1);
      expect((await sides[0]!.store.workflows.view(run_id)).statuses.join).toBe('running');
    }
    const jobs = await sides[0]!.queues.get('agent-race').getJobs(['waiting', 'prioritized', 'delayed']);
    expect(jobs.filter((job) => job.data.step_id === 'join')).toHaveLength(20);
  });
});
