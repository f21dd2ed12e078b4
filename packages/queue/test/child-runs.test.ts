import type { TraceEvent } from '@arcflow/core';
import { type ArcflowClient, createClient, keysFor } from '@arcflow/queue';
import { assertEventInvariants } from '@arcflow/testing';
import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { QueueName } from '../src/redis/keys.ts';
import { collect, fixtureWorkers, killRepeatedly, until } from './harness.ts';

// SPEC §13 "Agents as tools", through `arcflow worker` processes: a call of an agent tool starts a
// child run on any worker that serves the child's agent, holding no worker while it waits.

const FIXTURE = new URL('./fixtures/child-agents.ts', import.meta.url).pathname;
const { forTest } = fixtureWorkers(FIXTURE);

/** The child run the run's first call started, once it is running. */
async function runningChild(client: ArcflowClient, run_id: string): Promise<string> {
  let child = '';
  await until(async () => {
    child = ofKind(await collect(client, run_id), 'ToolCallStarted')[0]?.child_run_id ?? '';
    return child !== '' && (await client.get(child))?.status === 'running';
  }, 15_000);
  return child;
}

const ofKind = <K extends TraceEvent['kind']>(events: readonly TraceEvent[], kind: K) => events.filter((event): event is Extract<TraceEvent, { kind: K }> => event.kind === kind);

describe('agents as tools through worker processes', () => {
  it('runs two children of one turn in parallel on other workers and joins their answers in call order', async () => {
    const workers = forTest('children-parallel');
    // One slot each: the coordinator's worker cannot also run both children at once.
    const flags = { args: ['--concurrency', '1'] };
    await Promise.all([workers.start(flags), workers.start(flags), workers.start(flags)]);
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const { run_id } = await client.enqueue({ agent: 'coordinator', input: 'ask:slow:600,slow:300' });
      const run = await client.wait(run_id, { timeout_ms: 30_000 });
      expect(run).toMatchObject({ status: 'completed', output: 'got: researched slow:600 | researched slow:300' });
      const events = await collect(client, run_id);
      assertEventInvariants(events);
      const started = ofKind(events, 'ToolCallStarted');
      expect(started.map((event) => event.tool_call_id)).toEqual(expect.arrayContaining(['r1_0', 'r1_1']));
      const children = started.map((event) => event.child_run_id!);
      expect(new Set(children).size).toBe(2);
      const records = await Promise.all(children.map((id) => client.get(id)));
      for (const [index, record] of records.entries()) {
        expect(record).toMatchObject({ status: 'completed', agent: 'researcher', parent_run_id: run_id, parent_tool_call_id: started[index]!.tool_call_id });
      }
      // They overlapped: each began before the other ended.
      const [a, b] = records as NonNullable<(typeof records)[number]>[];
      expect(a!.created_at).toBeLessThan(b!.finished_at!);
      expect(b!.created_at).toBeLessThan(a!.finished_at!);
      // Two different processes answered them.
      const pids = await workers.reader().lrange(workers.key('researcher-pids'), 0, -1);
      expect(new Set(pids).size).toBe(2);
      const completed = ofKind(events, 'ToolCallCompleted');
      expect(completed.map((event) => event.tool_call_id).sort()).toEqual(['r1_0', 'r1_1']);
      expect(completed.every((event) => event.duration_ms >= 250)).toBe(true);
    } finally {
      await client.close();
    }
  });

  it('gives the parent child_failed when a child fails, and the parent goes on', async () => {
    const workers = forTest('children-failed');
    await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const { run_id } = await client.enqueue({ agent: 'coordinator', input: 'ask:fail,fine' });
      const run = await client.wait(run_id, { timeout_ms: 20_000 });
      expect(run).toMatchObject({ status: 'completed', output: 'got: Error: sub-agent failed — provider_error | researched fine' });
      const events = await collect(client, run_id);
      assertEventInvariants(events);
      expect(ofKind(events, 'ToolCallFailed')).toEqual([expect.objectContaining({ tool_call_id: 'r1_0', error_code: 'child_failed' })]);
    } finally {
      await client.close();
    }
  });

  it('cancels a running child when its parent is cancelled', async () => {
    const workers = forTest('children-cancel');
    await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const { run_id } = await client.enqueue({ agent: 'coordinator', input: 'ask:slow:20000' });
      const child = await runningChild(client, run_id);
      await client.cancel(run_id);
      expect(await client.wait(child, { timeout_ms: 10_000 })).toMatchObject({ status: 'cancelled', parent_run_id: run_id });
      expect(await client.get(run_id)).toMatchObject({ status: 'cancelled' });
      const events = await collect(client, run_id);
      assertEventInvariants(events);
      expect(ofKind(events, 'ToolCallFailed')).toEqual([expect.objectContaining({ error_code: 'cancelled' })]);
    } finally {
      await client.close();
    }
  });

  it('starts one child per call when the worker that started it is SIGKILLed', async () => {
    const workers = forTest('children-sigkill');
    const first = await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const { run_id } = await client.enqueue({ agent: 'coordinator', input: 'ask:slow:1500' });
      await until(async () => ofKind(await collect(client, run_id), 'ToolCallStarted').length > 0, 15_000);
      first.kill('SIGKILL');
      await workers.start();
      const run = await client.wait(run_id, { timeout_ms: 30_000 });
      expect(run).toMatchObject({ status: 'completed', output: 'got: researched slow:1500' });
      const researched = await client.list({ agent: 'researcher', limit: 10 });
      expect(researched.runs.map((record) => record.parent_run_id)).toEqual([run_id]);
      assertEventInvariants(await collect(client, run_id));
    } finally {
      await client.close();
    }
  });

  it("stops the parent when a child's tokens push its budget over", async () => {
    const workers = forTest('children-budget');
    await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      // Round 1: 5 tokens and a child of 500; round 2 (5 more) asks again: 510 > 400.
      const { run_id } = await client.enqueue({ agent: 'thrifty', input: 'twice:x' });
      const run = await client.wait(run_id, { timeout_ms: 20_000 });
      expect(run).toMatchObject({ status: 'failed', error: { error_code: 'budget_exceeded' } });
      // The run's own usage is its own calls; the child's spend counted toward the budget only.
      expect(run.usage.total).toBe(10);
      expect(ofKind(await collect(client, run_id), 'ToolCallStarted')).toHaveLength(1);
    } finally {
      await client.close();
    }
  });

  it("starts a child with what its parent's budget leaves", async () => {
    const workers = forTest('children-budget-left');
    await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      // frugal (400 tokens) has spent 5 when its child starts: the child may spend 395, and its first response is 500.
      const { run_id } = await client.enqueue({ agent: 'frugal', input: 'ask:x' });
      const run = await client.wait(run_id, { timeout_ms: 20_000 });
      expect(run).toMatchObject({ status: 'completed', output: 'got: Error: sub-agent failed — budget_exceeded' });
      const child = ofKind(await collect(client, run_id), 'ToolCallStarted')[0]!.child_run_id!;
      expect(await client.get(child)).toMatchObject({ status: 'failed', error: { error_code: 'budget_exceeded', message: expect.stringContaining('its budget is 395') } });
    } finally {
      await client.close();
    }
  });

  it('refuses a fifth level of children as a tool error, and every run of the chain completes', async () => {
    const workers = forTest('children-depth');
    await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const { run_id } = await client.enqueue({ agent: 'd0', input: 'deep' });
      const run = await client.wait(run_id, { timeout_ms: 30_000 });
      // A tool error (SPEC §13): the model reads SPEC §3's text for one; the worker's log says why.
      expect(run).toMatchObject({ status: 'completed', output: 'Error: tool temporarily unavailable' });
      const runs = (await client.list({ limit: 20 })).runs;
      expect(runs.map((record) => record.agent).sort()).toEqual(['d0', 'd1', 'd2', 'd3', 'd4']);
      const d4 = runs.find((record) => record.agent === 'd4')!;
      const events = await collect(client, d4.run_id);
      expect(ofKind(events, 'ToolCallFailed')).toEqual([expect.objectContaining({ tool_name: 'd5', error_code: 'tool_error' })]);
    } finally {
      await client.close();
    }
  });

  it('starts exactly one child per call and loses none while workers are SIGKILLed (12 runs of 2 children)', async () => {
    const workers = forTest('children-chaos');
    // Workers die here far more often than in a fleet: a job may lose five of them before its call ends worker_lost.
    const start = () => workers.start({ env: { ARCFLOW_MAX_STALLED_COUNT: '5' } });
    const live = [await start(), await start()];
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    const chaos = killRepeatedly(live, start, { firstMs: 500, periodMs: 2_000 });
    try {
      const runs = await Promise.all(Array.from({ length: 12 }, (_, n) => client.enqueue({ agent: 'coordinator', input: `ask:slow:700,q${n}` })));
      const records = await Promise.all(runs.map(({ run_id }) => client.wait(run_id, { timeout_ms: 120_000 })));
      expect(await chaos.stop()).toBeGreaterThanOrEqual(1);
      for (const [n, record] of records.entries()) {
        expect(record).toMatchObject({ status: 'completed', output: `got: researched slow:700 | researched q${n}` });
        assertEventInvariants(await collect(client, record.run_id));
      }
      const children = (await client.list({ agent: 'researcher', limit: 100 })).runs;
      expect(children).toHaveLength(24);
      expect(new Set(children.map((child) => `${child.parent_run_id}/${child.parent_tool_call_id}`)).size).toBe(24);
      expect(children.every((child) => child.status === 'completed')).toBe(true);
    } finally {
      await chaos.stop();
      await client.close();
    }
  }, 180_000);

  it("settles a parent's call from the watchdog when the child ended without settling it", async () => {
    const workers = forTest('children-watchdog');
    await workers.start({ env: { ARCFLOW_WATCHDOG_MS: '1000' } });
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const { run_id } = await client.enqueue({ agent: 'coordinator', input: 'ask:slow:30000' });
      const child = await runningChild(client, run_id);
      // Ended underneath, as by a process that died right after the write that ended it: nothing settles the parent's call.
      const keys = keysFor(workers.prefix);
      await workers
        .reader()
        .hset(keys.run(child).record, 'status', 'failed', 'error', JSON.stringify({ code: 'RunFailed', error_code: 'stalled', message: 'x' }), 'finished_at', String(Date.now()));
      const run = await client.wait(run_id, { timeout_ms: 20_000 });
      expect(run).toMatchObject({ status: 'completed', output: 'got: Error: sub-agent failed — stalled' });
    } finally {
      await client.close();
    }
  });

  it("settles a parent's call at once when a child's provider job comes again after the child ended (its worker died before settling)", async () => {
    const workers = forTest('children-ended-redelivered');
    await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    const queue = new Queue(QueueName.agent('researcher'), { connection: workers.reader(), prefix: `{${workers.prefix}}` });
    try {
      const { run_id } = await client.enqueue({ agent: 'coordinator', input: 'ask:slow:30000' });
      const child = await runningChild(client, run_id);
      // Ended, as by a process that died right after the write that ended it; then its provider job comes again (the stall check's redelivery).
      await workers
        .reader()
        .hset(
          keysFor(workers.prefix).run(child).record,
          'status',
          'failed',
          'error',
          JSON.stringify({ code: 'RunFailed', error_code: 'stalled', message: 'x' }),
          'finished_at',
          String(Date.now()),
        );
      await queue.add('provider', { run_id: child, step_id: 's1', iteration: 1, trace: {} });
      // Not the watchdog's repair: that comes only after a minute of quiet.
      const run = await client.wait(run_id, { timeout_ms: 10_000 });
      expect(run).toMatchObject({ status: 'completed', output: 'got: Error: sub-agent failed — stalled' });
    } finally {
      await queue.close();
      await client.close();
    }
  });

  it('gives the parent child_failed when a child is cancelled on its own', async () => {
    const workers = forTest('children-cancel-child');
    await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const { run_id } = await client.enqueue({ agent: 'coordinator', input: 'ask:slow:20000' });
      const child = await runningChild(client, run_id);
      await client.cancel(child);
      expect(await client.wait(run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', output: 'got: Error: sub-agent failed — cancelled' });
    } finally {
      await client.close();
    }
  });

  it('cancels a child at its next step when its parent ended without cancelling it (a cancel that died first)', async () => {
    const workers = forTest('children-orphan');
    await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const { run_id } = await client.enqueue({ agent: 'coordinator', input: 'ask:tool:1500' });
      const child = await runningChild(client, run_id);
      // Ended underneath, as by a cancel whose process died before it reached the children.
      await workers.reader().hset(keysFor(workers.prefix).run(run_id).record, 'status', 'cancelled');
      expect(await client.wait(child, { timeout_ms: 20_000 })).toMatchObject({ status: 'cancelled' });
    } finally {
      await client.close();
    }
  });

  it("refuses a child's record that names a call its id was not made from", async () => {
    const workers = forTest('children-forged');
    await workers.start({ env: { ARCFLOW_WATCHDOG_MS: '500' } });
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const victim = await client.enqueue({ agent: 'coordinator', input: 'ask:slow:4000' });
      const forger = await client.enqueue({ agent: 'coordinator', input: 'ask:slow:60000' });
      const victimChild = await runningChild(client, victim.run_id);
      const forgerChild = await runningChild(client, forger.run_id);
      // The forger's child claims the victim's call and ends: its answer must not become the victim's.
      const keys = keysFor(workers.prefix);
      const reader = workers.reader();
      await reader.hset(keys.run(forgerChild).record, 'parent_call', (await reader.hget(keys.run(victimChild).record, 'parent_call'))!);
      await reader.hset(keys.run(forgerChild).record, 'status', 'completed', 'output', 'forged', 'finished_at', String(Date.now()));
      expect(await client.wait(victim.run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', output: 'got: researched slow:4000' });
    } finally {
      await client.close();
    }
  });
});
