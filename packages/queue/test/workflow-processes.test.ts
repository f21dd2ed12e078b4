import type { TraceEvent } from '@arcflow/core';
import { createClient } from '@arcflow/queue';
import { TEST_REDIS_URL, assertWorkflowInvariants } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { collect, fixtureWorkers, until } from './harness.ts';

const { redis, forTest } = fixtureWorkers(new URL('./fixtures/workflow-agents.ts', import.meta.url).pathname);

function setup(name: string) {
  const workers = forTest(name);
  const start = (args: string[] = []) => workers.start({ args });
  return { prefix: workers.prefix, start, test: workers.key, client: createClient({ redis: TEST_REDIS_URL, prefix: workers.prefix }) };
}

const count = (events: readonly TraceEvent[], kind: string, step_id: string) => events.filter((event) => event.kind === kind && event.step_id === step_id).length;

describe('workflows across worker processes', () => {
  it('runs diamonds on two workers: the middle steps overlap on different workers, finish together, and the last step starts once', async () => {
    const { start, test, client } = setup('wf-diamond');
    // One tool execution at a time per worker: two steps waiting at the barrier must be on two workers.
    await Promise.all([start(['--concurrency', '1']), start(['--concurrency', '1'])]);
    const inputs = ['r1', 'r2', 'r3', 'r4', 'r5'];
    for (const input of inputs) {
      const { run_id } = await client.enqueue({ agent: 'process_diamond', input });
      const run = await client.wait(run_id, { timeout_ms: 30_000 });
      expect(run.status).toBe('completed');
      expect(run.output).toBe(`wrote: ${input}\n\n[b]\nb met\n\n[c]\nc met`);
      const pids = await redis.hgetall(test(`meet:${input}:pids`));
      expect(new Set(Object.values(pids)).size).toBe(2);
      const events = await collect(client, run_id);
      assertWorkflowInvariants(events);
      expect(count(events, 'StepStarted', 'd')).toBe(1);
      expect(count(events, 'StepCompleted', 'd')).toBe(1);
      expect(Number(await redis.hget(test('provider_calls'), `${input}|writer`))).toBe(1);
    }
    await client.close();
  });

  it('finishes a workflow after SIGKILL of the worker in the middle of a step, recording nothing twice', async () => {
    const { start, test, client } = setup('wf-crash');
    const first = await start();
    const { run_id } = await client.enqueue({ agent: 'process_crash', input: 'crash me' });
    await until(async () => Number(await redis.get(test('exec:stall_once'))) === 1, 20_000, 50);
    first.kill('SIGKILL');
    await first.exited;
    await start();
    const run = await client.wait(run_id, { timeout_ms: 40_000 });
    expect(run.status).toBe('completed');
    expect(run.steps).toMatchObject({ first: { status: 'completed' }, stalls: { status: 'completed' }, last: { status: 'completed' } });
    const events = await collect(client, run_id);
    assertWorkflowInvariants(events);
    for (const step of ['first', 'stalls', 'last']) {
      expect(count(events, 'StepStarted', step)).toBe(1);
      expect(count(events, 'StepCompleted', step)).toBe(1);
    }
    expect(count(events, 'ToolCallCompleted', 'stalls')).toBe(1);
    expect(events.filter((event) => event.kind === 'ToolCallStarted').map((event) => (event as { attempt: number }).attempt)).toEqual([1, 2]);
    await client.close();
  });
});
