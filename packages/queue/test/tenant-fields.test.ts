import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Agent, silentLogger } from '@arcflow/core';
import { ARCFLOW_BIN } from '@arcflow/worker';
import { createClient, keysFor, startWorker } from '@arcflow/queue';
import { Dispatcher } from '../src/jobs/dispatcher.ts';
import type { FairBatchRedis } from '../src/tenancy/fair-batches.ts';
import { TEST_REDIS_URL, scriptedProvider, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { testResources } from './harness.ts';

// A run's tenant and priority (SPEC §14): checked at enqueue, kept on the record, listed by tenant;
// a worker's tenant options are checked at start.

const { prefixes, open, redis } = testResources();
const agent = new Agent({ name: 'tenant_fields', instructions: 'x' });

async function registered(name: string) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  // Registers the agent, then goes: the runs below wait in their queue.
  await (await startWorker({ agents: [agent], provider: scriptedProvider([]), redis: TEST_REDIS_URL, prefix, logger: silentLogger })).close();
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  return { client, prefix };
}

describe('tenant and priority on a run', () => {
  it('keeps them on the record, lists by tenant (no tenant: default), and refuses bad ones naming the field', async () => {
    const { client } = await registered('tenant-fields');
    const acme = await client.enqueue({ agent: agent.name, input: 'a', tenant: 'acme.eu:team-1', priority: 1 });
    const plain = await client.enqueue({ agent: agent.name, input: 'b' });
    expect(await client.get(acme.run_id)).toMatchObject({ tenant: 'acme.eu:team-1', priority: 1 });
    const record = await client.get(plain.run_id);
    expect(record?.tenant).toBeUndefined();
    expect(record?.priority).toBeUndefined();
    expect((await client.list({ tenant: 'acme.eu:team-1' })).runs.map((run) => run.run_id)).toEqual([acme.run_id]);
    expect((await client.list({ tenant: 'default' })).runs.map((run) => run.run_id)).toEqual([plain.run_id]);
    for (const [request, message] of [
      [{ tenant: 'a b' }, /^tenant must match/],
      [{ tenant: 'x'.repeat(129) }, /^tenant must match/],
      [{ priority: 0 }, /^priority must be an integer from 1/],
      [{ priority: 11 }, /^priority must be an integer from 1/],
      [{ priority: 2.5 }, /^priority must be an integer from 1/],
    ] as const) {
      await expect(client.enqueue({ agent: agent.name, input: 'c', ...request })).rejects.toMatchObject({ code: 'invalid_request', message: expect.stringMatching(message) });
    }
    await expect(client.list({ tenant: 'no spaces' })).rejects.toMatchObject({ code: 'invalid_request' });
  });

  it('takes --tenant and --priority on arcflow enqueue, and lists by --tenant on arcflow runs', async () => {
    const { client, prefix } = await registered('tenant-cli');
    const cli = (...args: string[]) =>
      promisify(execFile)(process.execPath, [ARCFLOW_BIN, ...args], { env: { ...process.env, REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: prefix } });
    const run_id = (await cli('enqueue', agent.name, 'x', '--tenant', 'acme', '--priority', '2')).stdout.trim();
    await client.enqueue({ agent: agent.name, input: 'y', tenant: 'other' });
    expect(await client.get(run_id)).toMatchObject({ tenant: 'acme', priority: 2 });
    const listed = JSON.parse((await cli('runs', '--tenant', 'acme', '--json')).stdout) as { runs: { run_id: string }[] };
    expect(listed.runs.map((run) => run.run_id)).toEqual([run_id]);
    await expect(cli('enqueue', agent.name, 'x', '--priority', 'high')).rejects.toMatchObject({ stderr: expect.stringContaining('--priority must be a whole number') });
  }, 30_000);

  it('refuses a worker whose tenant_weights or tenant_limits has a bad tenant, key or value, naming it', async () => {
    const prefix = testPrefix('tenant-options');
    prefixes.push(prefix);
    const start = (tenant_weights: Record<string, unknown>) =>
      startWorker({
        agents: [agent],
        provider: scriptedProvider([]),
        redis: TEST_REDIS_URL,
        prefix,
        logger: silentLogger,
        tenant_weights: tenant_weights as Record<string, number>,
      });
    await expect(start({ acme: 0 })).rejects.toThrow('tenant_weights.acme: expected a number from 0.001 to 1000, got 0');
    await expect(start({ acme: '2' })).rejects.toThrow('tenant_weights.acme: expected a number');
    await expect(start({ 'a b': 1 })).rejects.toThrow("tenant_weights: 'a b' is not a tenant name");
    const limited = (tenant_limits: Record<string, unknown>) =>
      startWorker({ agents: [agent], provider: scriptedProvider([]), redis: TEST_REDIS_URL, prefix, logger: silentLogger, tenant_limits: tenant_limits as never });
    await expect(limited({ '*': { max_active_run: 2 } })).rejects.toThrow("tenant_limits.*: unknown key 'max_active_run'");
    await expect(limited({ acme: { runs_per_minute: 0 } })).rejects.toThrow('tenant_limits.acme.runs_per_minute: expected a whole number of at least 1, got 0');
    // An unknown option of its own is refused too, naming it (a misspelt option would else be ignored).
    const misspelt = { agents: [agent], provider: scriptedProvider([]), redis: TEST_REDIS_URL, prefix, logger: silentLogger, tenant_weight: { acme: 2 } };
    await expect(startWorker(misspelt as never)).rejects.toThrow("unknown option 'tenant_weight' in the worker options; did you mean 'tenant_weights'?");
  });

  it("gives a tenant named like a property every object has (constructor, toString, __proto__) the '*' limits, weight and budget", async () => {
    const prefix = testPrefix('tenant-names');
    prefixes.push(prefix);
    const tenancy = { tenant_limits: { '*': { runs_per_minute: 1 } }, tenant_weights: { '*': 3 }, tenant_budgets: { '*': { max_cost_usd_per_day: 0.5 } } };
    await (await startWorker({ agents: [agent], provider: scriptedProvider([]), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...tenancy })).close();
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    open.push(client);
    const queues = new Dispatcher(redis, keysFor(prefix));
    open.push(queues);
    for (const tenant of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      expect(await queues.tenants.limitsOf(tenant)).toEqual({ runs_per_minute: 1 });
      expect(await queues.tenants.weightOf(tenant)).toBe(3);
      expect(await queues.tenants.budgetOf(tenant)).toEqual({ max_cost_usd_per_day: 0.5 });
      await client.enqueue({ agent: agent.name, input: 'first', tenant });
      await expect(client.enqueue({ agent: agent.name, input: 'second', tenant })).rejects.toMatchObject({ code: 'tenant_rate_limited' });
    }
  });
});

/** A queue of its own prefix, and how to add a job of a run (its id the run's) with its fair priority. */
function fairQueue(name: string) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  const queues = new Dispatcher(redis, keysFor(prefix));
  open.push(queues);
  const queue = queues.get(name);
  const add = async (run_id: string, tenant: string, priority?: number) => {
    queues.fair.remember(run_id, { tenant, ...(priority ? { priority } : {}) });
    await queue.add('job', {}, { jobId: run_id, priority: await queues.fair.priority(queue, run_id, run_id) });
  };
  return { queue, add };
}

describe("a queue's fair clock", () => {
  it("moves every waiting job and stored tag down when virtual time passes half of BullMQ's range, keeping their order", async () => {
    const { queue, add } = fairQueue('fair-rebase');
    // Virtual time just under half the range; tenant b's last tag a step past it.
    await redis.hset(queue.toKey('arcflow-fair'), 'v', '104857', 'top', '104857', '1|b', '104858');
    await add('run_a0', 'a');
    await add('run_a1', 'a');
    await add('run_a2', 'a');
    await add('run_b1', 'b', 1);
    await queue.remove('run_a0');
    const before = await queue.getPrioritized();
    expect(Math.min(...before.map((job) => job.priority))).toBeGreaterThan(1_000_000);
    // The head's tag is past half the range: this add renormalises.
    await add('run_c1', 'c');
    const after = await queue.getPrioritized();
    expect(before.map((job) => job.id)).toEqual(['run_b1', 'run_a1', 'run_a2']);
    // The waiting jobs keep their order; the newcomer c starts at the head's tag (b1's, a1's too): after those.
    expect(after.map((job) => job.id)).toEqual(['run_b1', 'run_a1', 'run_c1', 'run_a2']);
    expect(Math.max(...after.map((job) => job.priority))).toBeLessThan(100);
    // The job hashes say the same, so a job moved back to waiting keeps its place.
    expect(Number(await redis.hget(queue.toKey('run_a2'), 'priority'))).toBe(after.find((job) => job.id === 'run_a2')!.priority);
  });

  it("moves a tenant's waiting lower-priority jobs behind its higher-priority job, keeping their order and the other tenants' turns", async () => {
    const { queue, add } = fairQueue('fair-strict');
    for (const run_id of ['a0', 'a1', 'a2', 'a3']) await add(run_id, 'a');
    for (const run_id of ['b0', 'b1']) await add(run_id, 'b');
    const waiting = async () => (await queue.getPrioritized()).map((job) => job.id);
    expect(await waiting()).toEqual(['a0', 'b0', 'a1', 'b1', 'a2', 'a3']);
    await add('a_urgent', 'a', 1);
    expect(await waiting()).toEqual(['a_urgent', 'b0', 'a0', 'b1', 'a1', 'a2', 'a3']);
    await add('a_urgent2', 'a', 1);
    // Tenant a: both urgent jobs, then its others in the order they came; b's turns are where they were.
    expect(await waiting()).toEqual(['a_urgent', 'b0', 'a_urgent2', 'b1', 'a0', 'a1', 'a2', 'a3']);
    // A level between them goes after a's level 1 jobs and before its level 5 ones.
    await add('a_middle', 'a', 3);
    expect((await waiting()).filter((id) => id?.startsWith('a'))).toEqual(['a_urgent', 'a_urgent2', 'a_middle', 'a0', 'a1', 'a2', 'a3']);
    // The job hashes say the same, so a job moved back to waiting keeps its place.
    for (const job of await queue.getPrioritized()) expect(Number(await redis.hget(queue.toKey(job.id!), 'priority'))).toBe(job.priority);
  });

  it("moves at most 1,000 waiting jobs a call: past that, a higher-priority job takes its tenant's next turn among them", async () => {
    const { queue, add } = fairQueue('fair-many');
    const batch = (ids: string[], priority: number) => Promise.all(ids.map((id) => add(id, 'a', priority)));
    const named = (from: number, count: number, name: string) => Array.from({ length: count }, (_, i) => `${name}${String(from + i).padStart(5, '0')}`);
    const waiting = named(0, 1_500, 'n');
    for (let from = 0; from < waiting.length; from += 500) await batch(waiting.slice(from, from + 500), 5);
    // 1,500 waiting from the first one's start: too many to move; the 1,000 take turns with them.
    const urgent = named(0, 1_000, 'u');
    await batch(urgent, 1);
    // 500 waiting from these ones' start: moved behind them.
    const later = named(1_000, 600, 'u');
    await batch(later, 1);
    const order = (await queue.getPrioritized()).map((job) => job.id!);
    expect(order.slice(0, 4)).toEqual(['u00000', 'n00000', 'u00001', 'n00001']);
    expect(order.filter((id) => id.startsWith('n'))).toEqual(waiting);
    expect(order.filter((id) => id.startsWith('u'))).toEqual([...urgent, ...later]);
    expect(order.slice(2_000)).toEqual([...later, ...waiting.slice(1_000)]);
  });

  it('moves a job whose id was used again from its new place, and a tenant whose stride grew', async () => {
    const { queue, add } = fairQueue('fair-reused');
    await add('x', 'a');
    await queue.remove('x');
    for (const id of ['b0', 'b1', 'b2']) await add(id, 'b');
    // Added anew under the same id, later: still behind a's priority 1 jobs.
    await add('x', 'a');
    await add('a_urgent', 'a', 1);
    const ids = async () => (await queue.getPrioritized()).map((job) => job.id);
    expect((await ids()).filter((id) => id?.startsWith('a') || id === 'x')).toEqual(['a_urgent', 'x']);
    // A tenant whose weight fell (its stride grew) between its jobs still has them moved.
    const fair = redis as unknown as FairBatchRedis;
    const args = (id: string, level: number, stride: number) => [id, 'c', level, stride];
    const priorityOf = async (id: string, level: number, stride: number) => {
      const [priority] = await fair.arcflowFairPriority(queue.toKey('arcflow-fair'), queue.keys.prioritized!, queue.toKey(''), ...args(id, level, stride));
      await queue.add('job', {}, { jobId: id, priority });
    };
    await priorityOf('c_n0', 5, 1);
    await priorityOf('c_u1', 1, 2);
    await priorityOf('c_u2', 1, 2);
    expect((await ids()).filter((id) => id?.startsWith('c_'))).toEqual(['c_u1', 'c_u2', 'c_n0']);
  });

  it('gives the jobs asked for in one tick the places the same asks in turn give, in one script call per queue', async () => {
    const prefix = testPrefix('fair-batch');
    prefixes.push(prefix);
    const queues = new Dispatcher(redis, keysFor(prefix));
    open.push(queues);
    // The same history on two queues: tenant b's priority 8 job ahead, then tenant a's jobs at
    // levels 8 and 3 (a level 3 job goes before the tenant's level 8 jobs), and tenant b at level 5.
    const asks: [string, string, number][] = [
      ['b0', 'b', 8],
      ['a0', 'a', 8],
      ['a1', 'a', 8],
      ['a2', 'a', 3],
      ['a3', 'a', 3],
      ['a4', 'a', 3],
      ['a5', 'a', 8],
      ['b1', 'b', 5],
      ['b2', 'b', 5],
    ];
    for (const [run_id, tenant, priority] of asks) queues.fair.remember(run_id, { tenant, priority });
    const inTurn = queues.get('in-turn');
    const together = queues.get('together');
    // In turn: each job is added before the next is asked for, so it waits (the first is the head).
    for (const [run_id] of asks) await inTurn.add('job', {}, { jobId: run_id, priority: await queues.fair.priority(inTurn, run_id, run_id) });
    // The clock calls this process sends, seen at the connection's defined command (MONITOR would
    // also see every other test file's commands on the shared Redis).
    const calls: string[] = [];
    const connection = redis as unknown as FairBatchRedis;
    const send = connection.arcflowFairPriority;
    connection.arcflowFairPriority = (clock, prioritized, jobPrefix, ...jobs) => {
      if (clock === together.toKey('arcflow-fair')) calls.push(jobs.filter((_, i) => i % 4 === 1).join(' '));
      return send.call(redis, clock, prioritized, jobPrefix, ...jobs);
    };
    let inOneTick: number[];
    try {
      // All in one tick, on a queue where nothing waits yet: the batch's first job counts as the
      // head for the ones after it, as it is once added.
      inOneTick = await Promise.all(asks.map(([run_id]) => queues.fair.priority(together, run_id, run_id)));
    } finally {
      connection.arcflowFairPriority = send;
    }
    for (const [at, [run_id]] of asks.entries()) await together.add('job', {}, { jobId: run_id, priority: inOneTick[at]! });
    const placed = async (queue: typeof inTurn) => (await queue.getPrioritized()).map((job) => [job.id!, job.priority]);
    expect(await placed(together)).toEqual(await placed(inTurn));
    // Each tenant's higher levels first (b's level 5 jobs before its level 8 one), the tenants in turn.
    expect((await placed(together)).map(([id]) => id)).toEqual(['a2', 'b1', 'a3', 'b2', 'a4', 'b0', 'a0', 'a1', 'a5']);
    // One call, in the order asked.
    expect(calls).toEqual(['b a a a a a a b b']);
  });
});
