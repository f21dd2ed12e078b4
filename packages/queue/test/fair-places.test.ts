import { Agent, silentLogger, tool } from '@arcflow/core';
import { createClient, keysFor, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, reply, scriptedProvider, testPrefix, toolCalls } from '@arcflow/testing';
import type { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { Dispatcher, type QueuedJob } from '../src/jobs/dispatcher.ts';
import { RunStore } from '../src/runs/run-store.ts';
import { testResources } from './harness.ts';

// The jobs a store script decides take their fair priorities (SPEC §14) in that script: the places
// must be the ones the queue's own clock call gives, in turn, and a write sent again (a
// re-delivery, a lost reply) must return the places given before and take no tag again.

const { prefixes, open, redis } = testResources();

/** Every fair clock of a prefix, as stored. */
async function clocks(prefix: string): Promise<Record<string, Record<string, string>>> {
  const keys = (await redis.keys(`${keysFor(prefix).tag}:*:arcflow-fair`)).sort();
  return Object.fromEntries(await Promise.all(keys.map(async (key) => [key, await redis.hgetall(key)] as const)));
}

/** The job at the head of a queue's prioritized set, removed (as a worker would take it). */
async function takeHead(queue: Queue): Promise<void> {
  const [head] = await queue.getPrioritized(0, 0);
  if (head?.id) await queue.remove(head.id);
}

describe('fair places given by the store scripts', () => {
  it("gives a round's jobs and its join the priorities the queues' own calls give in turn, and the same again to a write sent twice", async () => {
    const prefix = testPrefix('fair-places');
    prefixes.push(prefix);
    const queues = new Dispatcher(redis, keysFor(prefix));
    open.push(queues);
    const store = new RunStore(redis, prefix, 60);
    await queues.tenants.publish({ tenant_weights: { b: 3 } });
    // Three runs: tenant a at levels 8 and 3 (a level 3 job moves a's level 8 tags on), tenant b of weight 3.
    const runs = [
      { run_id: 'run_fp-a8', tenant: 'a', priority: 8 },
      { run_id: 'run_fp-b5', tenant: 'b', priority: 5 },
      { run_id: 'run_fp-a3', tenant: 'a', priority: 3 },
    ];
    for (const run of runs) {
      const spec = { run_id: run.run_id, agent: 'a', input: 'hi', config: null, exec_config: null, trace: {}, definition_hash: '', tenant: run.tenant, priority: run.priority };
      await store.createRun(spec, undefined, { kind: 'RunEnqueued', step_id: 's1', agent: 'a' });
    }
    // Each placed queue has a twin whose jobs ask their queue's clock themselves, in the same order.
    const twins = (name: string) => [queues.forRun(name, runs[0]!.run_id), queues.forRun(`${name}-asked`, runs[0]!.run_id)] as const;
    const [toolX, toolXAsked] = twins('tool-x');
    const [toolY, toolYAsked] = twins('tool-y');
    const [agent, agentAsked] = twins('agent-a');
    const iterations = new Map<string, number>();
    const rounds: [number, Queue[]][] = [
      [0, [toolX, toolX, toolY]],
      [1, [toolX, toolY, toolY]],
      [2, [toolX]],
      [1, [agent]],
      [0, [toolY, toolX, toolX, toolX]],
      [2, [agent]],
      [1, [toolX, toolX]],
    ];
    const askedTwin = new Map<Queue, Queue>([
      [toolX, toolXAsked],
      [toolY, toolYAsked],
      [agent, agentAsked],
    ]);
    const response = { content: null, finish_reason: 'tool_calls', usage: { input: 1, output: 1, total: 2 }, tool_calls: [] };
    let recordLast: (() => ReturnType<RunStore['recordResponse']>) | undefined;
    for (const [index, [which, queuesOfJobs]] of rounds.entries()) {
      const { run_id } = runs[which]!;
      const n = (iterations.get(run_id) ?? 0) + 1;
      iterations.set(run_id, n);
      const jobs: QueuedJob[] = queuesOfJobs.map((queue, at) => ({ id: `${run_id}.s1.i${n}.c${at}`, queue }));
      const placing = await queues.placing(run_id, jobs);
      const record = () => store.recordResponse(run_id, 's1', n, { response, plan: { type: 'final_answer' } }, [], [], undefined, 0, undefined, undefined, placing);
      recordLast = record;
      const places = (await record())?.places;
      const asked: number[] = [];
      for (const queue of queuesOfJobs) asked.push(await queues.fair.priority(askedTwin.get(queue)!, run_id));
      expect(
        jobs.map((job) => places?.get(job.id)),
        `round ${index}`,
      ).toEqual(asked);
      // The jobs are added on both sides, and every other round a worker takes each queue's head: V moves the same way.
      for (const [at, job] of jobs.entries()) {
        await job.queue.add('job', {}, { jobId: job.id, priority: places!.get(job.id)! });
        await askedTwin.get(job.queue)!.add('job', {}, { jobId: job.id, priority: asked[at]! });
      }
      if (index % 2 === 1) for (const queue of [toolX, toolXAsked, toolY, toolYAsked, agent, agentAsked]) await takeHead(queue);
    }
    // A write sent again (a re-delivered provider job, a lost reply) gets the places given before and moves no clock.
    const before = await clocks(prefix);
    const again = (await recordLast!())!;
    expect(again.recordedNow).toBe(false);
    expect([...again.places!.values()]).toEqual([...(await toolX.getPrioritized()).filter((job) => job.id?.startsWith('run_fp-b5.s1.i3.')).map((job) => job.priority)]);
    const loaded = await store.loadStep('run_fp-b5', 's1', 3);
    expect(loaded.places).toEqual(again.places);
    expect(await clocks(prefix)).toEqual(before);
  });

  it('places the join in the write that settles the round, once, and gives a re-delivery that place again', async () => {
    const prefix = testPrefix('fair-join');
    prefixes.push(prefix);
    const queues = new Dispatcher(redis, keysFor(prefix));
    open.push(queues);
    const store = new RunStore(redis, prefix, 60);
    const run_id = 'run_fj-1';
    await store.createRun({ run_id, agent: 'a', input: 'hi', config: null, exec_config: null, trace: {}, definition_hash: '', tenant: 't' }, undefined, {
      kind: 'RunEnqueued',
      step_id: 's1',
      agent: 'a',
    });
    const response = {
      content: null,
      finish_reason: 'tool_calls',
      usage: { input: 1, output: 1, total: 2 },
      tool_calls: ['c1', 'c2'].map((id) => ({ id, type: 'function' as const, function: { name: 't', arguments: '{}' } })),
    };
    const calls = ['c1', 'c2'].map((tool_call_id) => ({ step_id: 's1', iteration: 1, tool_call_id, tool_name: 't', fanned_out: true }));
    const plan = { type: 'tools' as const, calls: calls.map((_, index) => ({ index, action: 'execute' as const, signature: `s${index}`, fanned_out: true })) };
    await store.recordResponse(run_id, 's1', 1, { response, plan }, [], calls);
    const agent = queues.forRun('agent-a', run_id);
    const join = await queues.placing(run_id, [queues.providerJob({ queue: 'agent-a', attempts: 1 }, { run_id, step_id: 's1', iteration: 2 })]);
    expect(join).toMatchObject({ tenant: 't', level: 5, stride: 1 });
    const terminal = (tool_call_id: string) =>
      ({ kind: 'ToolCallCompleted', step_id: 's1', iteration: 1, tool_name: 't', tool_call_id, duration_ms: 1, output_size_bytes: 2 }) as const;
    // The first result leaves the round open: nothing is placed.
    const first = await store.recordToolResult(run_id, { ...calls[0]!, join }, { content: 'ok', terminal: terminal('c1') });
    expect(first).toEqual({ content: 'ok', openInRound: 1, recordedNow: true });
    expect(await clocks(prefix)).toEqual({});
    // The second settles it and places the join: the priority the queue's clock gives a first job of tenant t.
    const settled = await store.recordToolResult(run_id, { ...calls[1]!, join }, { content: 'ok', terminal: terminal('c2') });
    const twin = queues.forRun('agent-a-asked', run_id);
    expect(settled?.places).toEqual(new Map([[`${run_id}.s1.p2`, await queues.fair.priority(twin, run_id)]]));
    const before = await clocks(prefix);
    expect(Object.keys(before)).toEqual([agent.toKey('arcflow-fair'), twin.toKey('arcflow-fair')].sort());
    // Sent again, or re-delivered: the same place, no tag taken.
    const resent = await store.recordToolResult(run_id, { ...calls[1]!, join }, { content: 'ok', terminal: terminal('c2') });
    expect(resent).toEqual({ ...settled, recordedNow: false });
    const started = {
      event: { kind: 'ToolCallStarted', step_id: 's1', iteration: 1, tool_name: 't', tool_call_id: 'c1', input_schema_hash: 'h', input_size_bytes: 2, attempt: 2 } as const,
      ts: 1,
    };
    expect(await store.startToolCall(run_id, calls[0]!, started, 'start|s1|1|c1|2')).toEqual({ status: 'recorded', openInRound: 0, places: settled!.places });
    expect(await clocks(prefix)).toEqual(before);
  });

  it("places a run's first jobs in the write that creates it, and gives a resend of that write the same places", async () => {
    const prefix = testPrefix('fair-create');
    prefixes.push(prefix);
    const queues = new Dispatcher(redis, keysFor(prefix));
    open.push(queues);
    const store = new RunStore(redis, prefix, 60);
    const create = async (run_id: string, tenant: string, steps: string[]) => {
      queues.fair.remember(run_id, { tenant });
      const jobs = steps.map((step_id) => queues.providerJob({ queue: 'agent-a', attempts: 1 }, { run_id, step_id, iteration: 1 }));
      const placing = await queues.placing(run_id, jobs);
      const spec = { run_id, agent: 'a', input: 'hi', config: null, exec_config: null, trace: {}, definition_hash: '', tenant };
      return () => store.createRun(spec, undefined, { kind: 'RunEnqueued', step_id: 's1', agent: 'a' }, undefined, undefined, undefined, undefined, placing);
    };
    const twin = queues.forRun('agent-a-asked', 'run_fc-1');
    const first = await create('run_fc-1', 'a', ['s1']);
    const second = await create('run_fc-2', 'a', ['s1', 's2']);
    const third = await create('run_fc-3', 'b', ['s1']);
    const made = [await first(), await second(), await third()];
    const asked = [];
    for (const [run_id, count] of [
      ['run_fc-1', 1],
      ['run_fc-2', 2],
      ['run_fc-3', 1],
    ] as const)
      for (let i = 0; i < count; i += 1) asked.push(await queues.fair.priority(twin, run_id));
    expect(made.flatMap((each) => [...each.places!.values()])).toEqual(asked);
    const before = await clocks(prefix);
    const resent = await second();
    expect(resent).toEqual({ created: false, run_id: 'run_fc-2', places: made[1]!.places });
    expect(await clocks(prefix)).toEqual(before);
  });
});

describe('fair places on the engine', () => {
  it("adds a run's first job, a round's tool jobs and its join with the places the store scripts gave, calling no queue clock of their own", async () => {
    const prefix = testPrefix('fair-engine');
    prefixes.push(prefix);
    const noop = tool({ name: 'noop', description: 'n', input_schema: { type: 'object' }, handler: async () => 'ok' });
    const fanned = new Agent({ name: 'fair_fan', instructions: 'x', tools: [noop] });
    const provider = scriptedProvider([toolCalls([0, 1, 2].map((index) => ({ name: 'noop', args: { index }, id: `c${index}` }))), reply('done')]);
    const worker = await startWorker({ agents: [fanned], provider, redis: TEST_REDIS_URL, prefix, logger: silentLogger });
    open.push(worker);
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    // Which queues' clocks are called on their own (fairPriority's KEYS[1]), while the run goes.
    const clockCalls: string[] = [];
    const monitor = await redis.monitor();
    monitor.on('monitor', (_time: string, args: string[]) => {
      const clock = args.find((arg) => String(arg).startsWith(`{${prefix}}:`) && String(arg).endsWith(':arcflow-fair'));
      if (['eval', 'evalsha'].includes(String(args[0]).toLowerCase()) && clock) clockCalls.push(clock.split(':')[1]!);
    });
    const { run_id } = await client.enqueue({ agent: fanned.name, input: 'go', tenant: 'acme' });
    expect((await client.wait(run_id, { timeout_ms: 10_000 })).status).toBe('completed');
    await redis.ping();
    monitor.disconnect();
    // The first provider job (placed by createRun), the round's three tool jobs and its join ask no clock of their own.
    expect(clockCalls).toEqual([]);
    // Each tag was taken once: tenant acme's last tag on the tool's clock is its third job's, on the agent's its second's.
    const toolClock = (await redis.keys(`{${prefix}}:tool-noop-*:arcflow-fair`))[0]!;
    expect(Number(await redis.hget(toolClock, '5|acme'))).toBe(3);
    expect(Number(await redis.hget(`{${prefix}}:agent-fair_fan:arcflow-fair`, '5|acme'))).toBe(2);
  }, 30_000);
});
