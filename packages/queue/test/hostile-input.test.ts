import { Agent, ConfigError, type ModelProvider, silentLogger, tool, toolDefinitionHash } from '@arcflow/core';
import { type ArcflowClient, QueueName, createClient, keysFor, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, assertEventInvariants, capturingLogger, cleanupPrefix, rawCalls, reply, scriptedProvider, testPrefix, toolCall } from '@arcflow/testing';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { FAST, collect, until } from './harness.ts';

const prefix = testPrefix('hostile-input');
const redis = new Redis(TEST_REDIS_URL);
const executed: unknown[] = [];
const strict = tool({
  name: 'strict_tool',
  description: 'takes a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  handler: (args: unknown) => (executed.push(args), 'ran'),
});
const agent = new Agent({ name: 'guarded', tools: [strict] });
const logger = capturingLogger();
const worker = await startWorker({ agents: [agent], provider: scriptedProvider([reply('ok')], { repeat: true }), redis: TEST_REDIS_URL, prefix, logger, ...FAST });
const client = createClient({ redis: TEST_REDIS_URL, prefix });

afterAll(async () => {
  await client.close();
  await worker.close();
  await cleanupPrefix(prefix);
  await redis.quit();
});

/** Runs `use` against a worker of `agent` and a client on a prefix of their own, closed and cleaned up after. */
async function withOwnWorker(name: string, agent: Agent, provider: ModelProvider, use: (client: ArcflowClient, prefix: string) => Promise<void>): Promise<void> {
  const own = testPrefix(name);
  const ownWorker = await startWorker({ agents: [agent], provider, redis: TEST_REDIS_URL, prefix: own, logger: silentLogger, ...FAST });
  const ownClient = createClient({ redis: TEST_REDIS_URL, prefix: own });
  try {
    await use(ownClient, own);
  } finally {
    await ownClient.close();
    await ownWorker.close();
    await cleanupPrefix(own);
  }
}

const keysUnder = async () => (await redis.keys(`{${prefix}}*`)).sort();

describe("a model's malformed ids, once a run is cancelled", () => {
  it('cancels a run whose call id held a lone surrogate, closing the call once', async () => {
    let release!: () => void;
    const blocker = tool({
      name: 'blocker',
      description: 'waits',
      input_schema: { type: 'object' },
      handler: (_args, ctx) =>
        new Promise((resolve) => {
          release = () => resolve('late');
          ctx.signal.addEventListener('abort', () => resolve('aborted'));
        }),
    });
    const model = scriptedProvider([rawCalls([['id\ud800x', 'blocker', '{}']]), reply('done')]);
    await withOwnWorker('hostile-cancel', new Agent({ name: 'blocked', tools: [blocker] }), model, async (ownClient) => {
      const { run_id } = await ownClient.enqueue({ agent: 'blocked', input: 'go' });
      await until(async () => (await collect(ownClient, run_id)).some((event) => event.kind === 'ToolCallStarted'));
      expect(await ownClient.cancel(run_id)).toEqual({ cancelled: true, status: 'cancelled' });
      release?.();
      const events = await collect(ownClient, run_id);
      assertEventInvariants(events);
      const failed = events.filter((event) => event.kind === 'ToolCallFailed');
      expect(failed).toHaveLength(1);
      expect(failed[0]).toMatchObject({ tool_call_id: 'call_1_1', error_code: 'cancelled' });
    });
  });
});

describe('what another process left in Redis', () => {
  it('refuses to settle a waiting call whose wait has no place, writing nothing, and says so', async () => {
    const guarded = tool({ name: 'guarded_refund', description: 'refunds', input_schema: { type: 'object' }, needs_approval: true, handler: () => 'refunded' });
    const model = scriptedProvider([toolCall('guarded_refund', {}, 'call_wait'), reply('done')]);
    await withOwnWorker('hostile-wait', new Agent({ name: 'waiter', tools: [guarded] }), model, async (ownClient, own) => {
      const { run_id } = await ownClient.enqueue({ agent: 'waiter', input: 'go' });
      await until(async () => (await ownClient.get(run_id))?.status === 'waiting');
      const waits = keysFor(own).run(run_id).approvals;
      await redis.hdel(waits, 'call_wait|place');
      await expect(ownClient.approve(run_id, 'call_wait', { approved: true })).rejects.toThrow('the wait of call call_wait has no place (step|iteration)');
      expect(await redis.hget(waits, 'call_wait|status')).toBe('pending');
    });
  });
});

describe('requests from outside are checked before any Redis command', () => {
  it('refuses agent names and run ids that are not of their form, changing nothing', async () => {
    const before = await keysUnder();
    await expect(client.enqueue({ agent: 'guarded:workers', input: 'hi' })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(client.enqueue({ agent: 'x'.repeat(101), input: 'hi' })).rejects.toMatchObject({ code: 'invalid_request' });
    for (const bad of ['run_x:events', 'run x', '', 'a'.repeat(101)]) {
      await expect(client.get(bad)).rejects.toMatchObject({ code: 'invalid_run_id' });
      await expect(client.cancel(bad)).rejects.toMatchObject({ code: 'invalid_run_id' });
      await expect(client.wait(bad)).rejects.toMatchObject({ code: 'invalid_run_id' });
      expect(() => client.events(bad)).toThrow(/run_id must match/);
    }
    expect(await keysUnder()).toEqual(before);
  });

  it('refuses an exec_config or config that is too large, too deep or not plain JSON', async () => {
    const before = await keysUnder();
    const huge = { test: { steps: { s1: { output: 'x'.repeat(300 * 1024) } } } };
    await expect(client.enqueue({ agent: 'guarded', input: 'hi', exec_config: huge })).rejects.toMatchObject({ code: 'payload_too_large' });
    let deep: unknown = 'leaf';
    for (let level = 0; level < 100_000; level += 1) deep = [deep];
    await expect(client.enqueue({ agent: 'guarded', input: 'hi', exec_config: { test: { steps: { s1: { output: 'x' } } }, extra: deep } })).rejects.toThrow(
      /exec_config is nested more than 32 levels deep/,
    );
    await expect(client.enqueue({ agent: 'guarded', input: 'hi', config: { model: 'm', x: 1n } })).rejects.toThrow(/config holds a value of type bigint/);
    await expect(client.wait('run_abc', { timeout_ms: Number.NaN })).rejects.toMatchObject({ code: 'invalid_request' });
    // A poll interval that would spin is refused before the first read.
    for (const poll_ms of ['abc', 0, 1.5])
      expect(() => client.events('run_abc', { follow: true, poll_ms: poll_ms as number })).toThrow('poll_ms must be an integer from 10 to 60000');
    expect(await keysUnder()).toEqual(before);
  });

  it('refuses a test-mode tool call id that is not a string of the id form at enqueue', async () => {
    const exec_config = { test: { steps: { s1: { responses: [{ tool_calls: [{ id: 5, name: 'strict_tool', arguments: { city: 'Oslo' } }] }, { output: 'done' }] } } } };
    await expect(client.enqueue({ agent: 'guarded', input: 'hi', exec_config })).rejects.toThrow(ConfigError);
    await expect(client.enqueue({ agent: 'guarded', input: 'hi', exec_config })).rejects.toThrow(/tool_calls\[0\]\.id must match/);
  });

  it('never runs a handler on a tool job whose arguments no schema checked', async () => {
    const queue = new Queue(QueueName.tool('strict_tool', toolDefinitionHash(strict)), { connection: redis, prefix: keysFor(prefix).tag });
    const forged = {
      run_id: 'run_forged',
      step_id: 's1',
      iteration: 1,
      index: 0,
      tool_call_id: 'c1',
      tool_name: 'strict_tool',
      definition_hash: toolDefinitionHash(strict),
      input_size_bytes: 2,
      trace: {},
      join: { queue: QueueName.agent('guarded'), attempts: 1 },
    };
    const bad = await queue.add('strict_tool', { ...forged, args: { city: 42, extra: true } });
    const malformed = await queue.add('strict_tool', { ...forged, run_id: 'run:x', args: { city: 'Oslo' } });
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && !((await bad.isCompleted()) && (await malformed.isCompleted()))) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await bad.isCompleted()).toBe(true);
    expect(executed).toEqual([]);
    expect(logger.lines.some((line) => line.startsWith('tool job refused: its arguments fail the schema'))).toBe(true);
    expect(logger.lines.some((line) => line.startsWith('tool job refused: its data is malformed'))).toBe(true);
    await queue.close();
  });

  it('refuses a provider job whose data is not a provider job, writing nothing, and stays up', async () => {
    const queue = new Queue(QueueName.agent('guarded'), { connection: redis, prefix: keysFor(prefix).tag });
    const before = await keysUnder();
    const forged = [null, 'text', { run_id: 'run_forged', step_id: 's1', iteration: 0, trace: {} }, { run_id: 'run_forged', step_id: 's1', iteration: 1, trace: null }];
    const jobs = await Promise.all(forged.map((data) => queue.add('provider', data as never, { attempts: 1 })));
    const deadline = Date.now() + 10_000;
    const settled = async () => (await Promise.all(jobs.map((job) => job.isCompleted()))).every(Boolean);
    while (Date.now() < deadline && !(await settled())) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await settled()).toBe(true);
    expect(logger.lines.filter((line) => line.startsWith('provider job refused: its data is malformed'))).toHaveLength(4);
    // Only BullMQ's own keys of those jobs: no run key was written.
    expect((await keysUnder()).filter((key) => !before.includes(key) && !key.includes(':agent-guarded:'))).toEqual([]);
    // The worker still works.
    const { run_id } = await client.enqueue({ agent: 'guarded', input: 'hi' });
    expect(await client.wait(run_id, { timeout_ms: 10_000 })).toMatchObject({ status: 'completed' });
    await queue.close();
  });
});

describe('a response past the bounds of a turn', () => {
  it('is retried, and the worker log says why', async () => {
    const own = testPrefix('hostile-bounds');
    const ownLogger = capturingLogger();
    const crowd = rawCalls(Array.from({ length: 300 }, (_, n) => [`c${n}`, 'strict_tool', '{"city":"Oslo"}'] as const));
    const bounded = await startWorker({ agents: [agent], provider: scriptedProvider([crowd, reply('ok')]), redis: TEST_REDIS_URL, prefix: own, logger: ownLogger, ...FAST });
    const ownClient = createClient({ redis: TEST_REDIS_URL, prefix: own });
    try {
      const { run_id } = await ownClient.enqueue({ agent: 'guarded', input: 'go' });
      expect(await ownClient.wait(run_id, { timeout_ms: 10_000 })).toMatchObject({ status: 'completed', output: 'ok' });
      const failed = ownLogger.lines.find((line) => line.startsWith('provider call failed'));
      expect(failed).toContain('malformed provider response: 300 tool calls; the limit is 256');
    } finally {
      await ownClient.close();
      await bounded.close();
      await cleanupPrefix(own);
    }
  });
});

describe("a run's log holding lines that are not events (another process's writes)", () => {
  it('is refused by the reader naming the event and the run, for each kind of line', async () => {
    for (const line of ['not json', 'null', '5', '"text"', '{"no":"kind"}']) {
      const { run_id } = await client.enqueue({ agent: 'guarded', input: 'hi' });
      await client.wait(run_id, { timeout_ms: 10_000 });
      const seq = (await redis.rpush(keysFor(prefix).run(run_id).events, line)) as number;
      await expect(collect(client, run_id)).rejects.toThrow(`event ${seq} of run ${run_id} is not as arcflow writes it`);
    }
  });
});

describe("a run's record another process overwrote", () => {
  const finishedRun = async () => {
    const { run_id } = await client.enqueue({ agent: 'guarded', input: 'hi' });
    await client.wait(run_id, { timeout_ms: 10_000 });
    return run_id;
  };

  it('reads with the fields that cannot be read as such (an error that is not JSON, counts that are not numbers), and lists', async () => {
    const run_id = await finishedRun();
    const record = keysFor(prefix).record(run_id);
    await redis.hset(record, 'error', 'not json', 'forked_from', '{', 'usage_input', 'abc', 'iterations', 'x');
    await redis.hdel(record, 'created_at');
    const run = await client.get(run_id);
    expect(run).toMatchObject({ run_id, error: { error_code: 'unreadable_state' }, usage: { input: 0 }, iterations: 0, created_at: 0 });
    expect(run).not.toHaveProperty('forked_from');
    expect((await client.list({ limit: 200 })).runs.map((listed) => listed.run_id)).toContain(run_id);
  });

  it('refuses a record that is no longer a hash, naming it, and leaves it out of listings', async () => {
    const [broken, intact] = [await finishedRun(), await finishedRun()];
    const record = keysFor(prefix).record(broken);
    await redis.del(record);
    await redis.set(record, 'not a hash');
    await expect(client.get(broken)).rejects.toThrow(`record of run ${broken} is not as arcflow writes it`);
    const listed = (await client.list({ limit: 200 })).runs.map((run) => run.run_id);
    expect(listed).toContain(intact);
    expect(listed).not.toContain(broken);
    await redis.del(record);
  });

  it('refuses the events of a compacted run whose archive is not one, naming it; its record still reads', async () => {
    const run_id = await finishedRun();
    const record = keysFor(prefix).record(run_id);
    await until(async () => (await redis.hexists(record, 'archived')) === 1);
    await redis.set(keysFor(prefix).run(run_id).archive, 'garbage');
    expect(await client.get(run_id)).toMatchObject({ run_id, status: 'completed' });
    await expect(collect(client, run_id)).rejects.toThrow(`archive of run ${run_id} is not as arcflow writes it`);
  });
});

describe('tenant settings another process overwrote (SPEC §14)', () => {
  it('refuses an enqueue naming the key when they are not a JSON object, and uses what it knows of any other', async () => {
    await withOwnWorker('hostile-tenancy', agent, scriptedProvider([reply('ok')], { repeat: true }), async (_client, own) => {
      const key = keysFor(own).tenancy;
      // A fresh client each time: a client reads the settings once per 5 s.
      const enqueueWith = async (text: string, tenant: string) => {
        await redis.set(key, text);
        const fresh = createClient({ redis: TEST_REDIS_URL, prefix: own });
        try {
          return await fresh.enqueue({ agent: 'guarded', input: 'hi', tenant });
        } finally {
          await fresh.close();
        }
      };
      for (const text of ['not json', 'null', '5']) {
        await expect(enqueueWith(text, 'acme')).rejects.toThrow(`the tenant settings at ${key} is not as arcflow writes it`);
      }
      // Values it cannot use are left out (no limit), not obeyed half.
      await expect(enqueueWith('{"tenant_limits":{"acme":{"runs_per_minute":-1}},"tenant_weights":"heavy"}', 'acme')).resolves.toMatchObject({ created: true });
      // A newer worker's keys (a rolling upgrade) are passed over; the limits this version knows still hold.
      const newer = '{"tenant_limits":{"beta":{"runs_per_minute":1,"tokens_per_day":5}},"tenant_quotas":{"beta":3}}';
      await expect(enqueueWith(newer, 'beta')).resolves.toMatchObject({ created: true });
      await expect(enqueueWith(newer, 'beta')).rejects.toMatchObject({ code: 'tenant_rate_limited' });
    });
  });
});

describe("a run's key another process replaced with one of another type", () => {
  it("still ends the run (the watchdog fails it) for its events, its rounds or a round's results", async () => {
    for (const [name, damage] of [
      ['events', (record: string) => `${record}:events`],
      ['pending', (record: string) => `${record}:pending`],
      ['results', (record: string) => `${record}:s1:results:1`],
    ] as const) {
      let release = () => {};
      const held = new Promise<void>((resolve) => (release = resolve));
      let started = false;
      const slow = tool({
        name: 'held_tool',
        description: 'waits to be released',
        input_schema: { type: 'object' },
        handler: async () => {
          started = true;
          await held;
          return 'done';
        },
      });
      const heldAgent = new Agent({ name: 'held_agent', tools: [slow] });
      const provider = scriptedProvider([toolCall('held_tool', {}), reply('over')]);
      const own = testPrefix(`hostile-type-${name}`);
      const ownWorker = await startWorker({ agents: [heldAgent], provider, redis: TEST_REDIS_URL, prefix: own, logger: silentLogger, ...FAST, watchdog_ms: 500 });
      const ownClient = createClient({ redis: TEST_REDIS_URL, prefix: own });
      try {
        const { run_id } = await ownClient.enqueue({ agent: 'held_agent', input: 'go' });
        await until(async () => started);
        const key = damage(keysFor(own).record(run_id));
        await redis.del(key);
        await redis.set(key, 'another type');
        release();
        const run = await ownClient.wait(run_id, { timeout_ms: 20_000 });
        expect({ name, status: run.status }).toEqual({ name, status: 'failed' });
      } finally {
        release();
        await ownClient.close();
        await ownWorker.close();
        await cleanupPrefix(own);
      }
    }
  }, 90_000);
});

describe("a thread's key another process replaced with one of another type (SPEC §11)", () => {
  it('refuses the next run of the thread naming the key, not as a raw Lua error', async () => {
    const thread_id = 'hostile-thread';
    const { run_id } = await client.enqueue({ agent: 'guarded', input: 'hi', thread_id });
    await client.wait(run_id, { timeout_ms: 10_000 });
    const runs = `${keysFor(prefix).tagOf(run_id)}:thread:${thread_id}:runs`;
    expect(await redis.type(runs)).toBe('list');
    await redis.del(runs);
    await redis.hset(runs, 'not', 'a list');
    const refused = client.enqueue({ agent: 'guarded', input: 'again', thread_id });
    await expect(refused).rejects.toThrow(/^a key of .* \(read by the \w+ script\) is not as arcflow writes it/);
    await redis.del(runs);
  });
});
