import { createClient } from '@arcflow/queue';
import { describe, expect, it } from 'vitest';
import { fixtureWorkers, killRepeatedly } from './harness.ts';

// SPEC §17 "Run state", through `arcflow worker` processes: a thread's runs carry the state on, a
// bad initial state queues nothing, and under SIGKILLs every call's changes land exactly once.

const FIXTURE = new URL('./fixtures/state-agents.ts', import.meta.url).pathname;
const { forTest } = fixtureWorkers(FIXTURE);

describe('run state through worker processes', () => {
  it("starts a thread's next run from the state its last completed run left, unless given one", async () => {
    const workers = forTest('state-thread');
    await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const first = await client.enqueue({ agent: 'noter', input: 'items:a,b', thread_id: 'notes' });
      expect(await client.wait(first.run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', state: { facts: ['a', 'b'], last: 'b' } });
      const second = await client.enqueue({ agent: 'noter', input: 'items:c', thread_id: 'notes' });
      expect(await client.wait(second.run_id, { timeout_ms: 20_000 })).toMatchObject({
        status: 'completed',
        output: 'saw ["a","b"]',
        state: { facts: ['a', 'b', 'c'], last: 'c' },
      });
      // Given a state (even {}), a run on the thread starts from it.
      const third = await client.enqueue({ agent: 'noter', input: 'items:d', thread_id: 'notes', state: {} });
      expect(await client.wait(third.run_id, { timeout_ms: 20_000 })).toMatchObject({ output: 'saw []', state: { facts: ['d'], last: 'd' } });
      // The fourth starts from what the third left.
      const fourth = await client.enqueue({ agent: 'noter', input: 'items:e', thread_id: 'notes' });
      expect(await client.wait(fourth.run_id, { timeout_ms: 20_000 })).toMatchObject({ output: 'saw ["d"]' });
    } finally {
      await client.close();
    }
  });

  it('refuses a bad initial state naming state, and queues nothing', async () => {
    const workers = forTest('state-refused');
    await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      // The registered agent's max_state_bytes (4,096) bounds it.
      await expect(client.enqueue({ agent: 'noter', input: 'items:a', state: { big: 'x'.repeat(5_000) } })).rejects.toMatchObject({
        code: 'invalid_request',
        message: expect.stringMatching(/^state is \d+ bytes of JSON, over the agent's max_state_bytes \(4096\)$/),
      });
      await expect(client.enqueue({ agent: 'noter', input: 'items:a', state: 'facts' as never })).rejects.toMatchObject({
        code: 'invalid_request',
        message: 'state must be a JSON object, got string',
      });
      expect((await client.list({ limit: 10 })).runs).toEqual([]);
    } finally {
      await client.close();
    }
  });

  it('holds max_state_bytes whatever the parallelism: of four parallel calls adding 400 bytes each under 1,000, the later ones fail state_too_large', async () => {
    const workers = forTest('state-limit');
    await workers.start();
    await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const { run_id } = await client.enqueue({ agent: 'hoarder', input: 'hoard:a,b,c,d bytes:400' });
      const record = await client.wait(run_id, { timeout_ms: 30_000 });
      expect(record.status).toBe('completed');
      const ends: Record<string, string> = {};
      for await (const event of client.events(run_id)) {
        if (event.kind === 'ToolCallCompleted') ends[event.tool_call_id] = 'completed';
        if (event.kind === 'ToolCallFailed') ends[event.tool_call_id] = event.error_code;
      }
      // The four ran side by side: two fit (2 + 2 × 406 bytes of JSON, with the comma), a third would not.
      expect(Object.values(ends).sort()).toEqual(['completed', 'completed', 'state_too_large', 'state_too_large']);
      const kept = Object.keys(record.state ?? {}).sort();
      expect(kept).toEqual(['a', 'b', 'c', 'd'].filter((item) => ends[`h${item.charCodeAt(0) - 97}`] === 'completed'));
      expect(Buffer.byteLength(JSON.stringify(record.state))).toBeLessThanOrEqual(1_000);
    } finally {
      await client.close();
    }
  });

  it("fails the later of two parallel workflow steps whose changes together would take the run's state over its limit", async () => {
    const workers = forTest('state-limit-flow');
    await workers.start();
    await workers.start();
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    try {
      const { run_id } = await client.enqueue({ agent: 'hoard_flow', input: 'go' });
      const record = await client.wait(run_id, { timeout_ms: 30_000 });
      expect(record.status).toBe('failed');
      const steps = Object.values(record.steps ?? {});
      expect(steps.map((step) => step.status).sort()).toEqual(['completed', 'failed']);
      expect(steps.find((step) => step.status === 'failed')?.error).toMatchObject({ code: 'StepExecutionFailed', error_code: 'state_too_large' });
      const completed = Object.entries(record.steps ?? {}).find(([, step]) => step.status === 'completed')![0];
      expect(Object.keys(record.state ?? {})).toEqual([completed]);
      expect(Buffer.byteLength(JSON.stringify(record.state))).toBeLessThanOrEqual(262_144);
    } finally {
      await client.close();
    }
  });

  it('keeps each call’s changes exactly once, in call order, while workers are SIGKILLed (40 runs of 4 parallel calls)', async () => {
    const workers = forTest('state-chaos');
    // Workers die here far more often than in a fleet: a job may lose five of them before its call ends worker_lost.
    const start = () => workers.start({ env: { ARCFLOW_MAX_STALLED_COUNT: '5' } });
    const live = [await start(), await start()];
    const client = createClient({ redis: workers.url, prefix: workers.prefix });
    const chaos = killRepeatedly(live, start, { firstMs: 700, periodMs: 2_500 });
    try {
      const runs = await Promise.all(Array.from({ length: 40 }, (_, n) => client.enqueue({ agent: 'noter', input: `items:${n}a,${n}b,${n}c,${n}d hold:1000` })));
      const records = await Promise.all(runs.map(({ run_id }) => client.wait(run_id, { timeout_ms: 120_000 })));
      expect(await chaos.stop()).toBeGreaterThanOrEqual(1);
      for (const [n, record] of records.entries()) {
        // On a mismatch, the run's tool and state events say which call went where.
        const calls: string[] = [];
        if ((record.state?.facts as unknown[] | undefined)?.length !== 4) {
          for await (const event of client.events(record.run_id)) if (event.kind.startsWith('Tool') || event.kind === 'StateUpdated') calls.push(JSON.stringify(event));
        }
        expect(record.status).toBe('completed');
        expect(record.state, calls.join('\n')).toEqual({ facts: [`${n}a`, `${n}b`, `${n}c`, `${n}d`], last: `${n}d` });
      }
    } finally {
      await chaos.stop();
      await client.close();
    }
  }, 180_000);
});
