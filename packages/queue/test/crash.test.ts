import type { TraceEvent } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { assertEventInvariants, startFakeOpenAI } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { collect, fixtureWorkers, redisTargets, until as untilEvery } from './harness.ts';

const until = (check: () => Promise<boolean>, timeoutMs = 20_000) => untilEvery(check, timeoutMs, 50);

const FIXTURE = new URL('./fixtures/crash-agents.ts', import.meta.url).pathname;
const fixture = await import('./fixtures/crash-agents.ts');
const hasEvent = (events: TraceEvent[], kind: string, tool_call_id?: string) =>
  events.some((event) => event.kind === kind && (!tool_call_id || ('tool_call_id' in event && event.tool_call_id === tool_call_id)));

// The crash tests run on one Redis and on a 3-master Redis Cluster.
for (const target of redisTargets()) defineCrashTests(target.name, target.url);

function defineCrashTests(targetName: string, redisUrl: () => string): void {
  const { forTest } = fixtureWorkers(FIXTURE, redisUrl);

  function setup(name: string) {
    const { prefix, url, start: startWith, executions, reader } = forTest(name);
    const start = (env: Record<string, string> = {}, args: string[] = []) => startWith({ env, args });
    return { prefix, url, start, counter: executions, reader, client: createClient({ redis: url, prefix }) };
  }

  describe(`crashes, on ${targetName}`, () => {
    it('finishes a run on another worker after SIGKILL mid-tool, without re-running a recorded sibling', async () => {
      const { start, counter, client } = setup('kill-tool');
      const first = await start();
      const { run_id } = await client.enqueue({ agent: 'crash_agent', input: 'go' });
      await until(async () => (await counter('block')) === 1 && hasEvent(await collect(client, run_id), 'ToolCallCompleted', 'call_1'));
      first.kill('SIGKILL');
      const killedAt = Date.now();
      await first.exited;
      await start();
      const run = await client.wait(run_id, { timeout_ms: 30_000 });
      const recoveryMs = Date.now() - killedAt;
      expect(run.status).toBe('completed');
      expect(await counter('quick')).toBe(1);
      expect(await counter('block')).toBe(2);
      const events = await collect(client, run_id);
      assertEventInvariants(events);
      const blockEvents = events.filter((event) => 'tool_call_id' in event && event.tool_call_id === 'call_2');
      expect(blockEvents.map((event) => event.kind)).toEqual(['ToolCallStarted', 'ToolCallStarted', 'ToolCallCompleted']);
      expect(blockEvents.filter((event) => event.kind === 'ToolCallStarted').map((event) => (event as { attempt: number }).attempt)).toEqual([1, 2]);
      expect(recoveryMs).toBeLessThan(20_000);
      await client.close();
    });

    /**
     * Runs `agent` (its slow step counted as `counted`) on one worker at a time (loss budget 1) and SIGKILLs the worker under each
     * of the step's first `losses` deliveries, `afterMs` after its handler started; returns the run's events and executions.
     */
    async function loseDeliveries(
      name: string,
      losses: number,
      afterMs: number,
      { agent, counted } = { agent: 'frail_agent', counted: 'frail' },
    ): Promise<{ events: TraceEvent[]; executions: number }> {
      const { start, counter, client } = setup(name);
      let worker = await start({ ARCFLOW_MAX_STALLED_COUNT: '1' });
      try {
        const { run_id } = await client.enqueue({ agent, input: 'go' });
        for (let lost = 1; lost <= losses; lost += 1) {
          await until(async () => (await counter(counted)) === lost, 30_000);
          await new Promise((resolve) => setTimeout(resolve, afterMs));
          worker.kill('SIGKILL');
          await worker.exited;
          worker = await start({ ARCFLOW_MAX_STALLED_COUNT: '1' });
        }
        expect((await client.wait(run_id, { timeout_ms: 60_000 })).status).toBe('completed');
        return { events: await collect(client, run_id), executions: await counter(counted) };
      } finally {
        worker.kill('SIGKILL');
        await client.close();
      }
    }

    it('does not fail a call whose workers are SIGKILLed within its first second, more often than its loss budget', async () => {
      // Three deliveries in a row, each killed as soon as its handler has started (as a fleet under chaos loses them).
      const { events, executions } = await loseDeliveries('quick-losses', 3, 0);
      expect(events.find((event) => event.kind === 'ToolCallCompleted')).toMatchObject({ tool_name: 'frail' });
      expect(hasEvent(events, 'ToolCallFailed')).toBe(false);
      expect(executions).toBe(4);
    }, 120_000);

    // A job's stall limit is the same whatever the Redis: this one runs on one Redis only.
    if (targetName === 'one Redis')
      it('does not fail a model call whose workers are SIGKILLed under it more often than the loss budget: the fleet lost them', async () => {
        const { events, executions } = await loseDeliveries('provider-losses', 2, 1_000, { agent: 'musing_agent', counted: 'muse' });
        expect(events.find((event) => event.kind === 'RunCompleted')).toBeDefined();
        expect(hasEvent(events, 'StepFailed')).toBe(false);
        expect(executions).toBe(3);
      }, 120_000);

    it('ends worker_lost a call whose workers die under it past its first second more often than its loss budget, without running it again', async () => {
      const { events, executions } = await loseDeliveries('counted-losses', 2, 1_500);
      expect(events.find((event) => event.kind === 'ToolCallFailed')).toMatchObject({ tool_name: 'frail', error_code: 'worker_lost' });
      expect(executions).toBe(2);
    }, 120_000);

    it('settles a call whose tool job stalled for good, so its round joins and the run goes on', async () => {
      const { prefix, url, start, counter, client } = setup('stall-out');
      const first = await start();
      const { run_id } = await client.enqueue({ agent: 'crash_agent', input: 'go' });
      await until(async () => (await counter('block')) === 1);
      // Killed after its handler ran past the loss grace, so the loss counts against the call.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      first.kill('SIGKILL');
      await first.exited;
      // No stall is forgiven here: the killed call's job fails for good instead of running again.
      const second = await startWorker({
        agents: fixture.default,
        provider: fixture.provider,
        redis: url,
        prefix,
        lock_duration_ms: 1_000,
        stalled_interval_ms: 500,
        max_stalled_count: 0,
        logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
      });
      try {
        const run = await client.wait(run_id, { timeout_ms: 30_000 });
        expect(run.status).toBe('completed');
        expect(await counter('block')).toBe(1);
        const events = await collect(client, run_id);
        assertEventInvariants(events);
        const blockEvents = events.filter((event) => 'tool_call_id' in event && event.tool_call_id === 'call_2');
        expect(blockEvents.map((event) => event.kind)).toEqual(['ToolCallStarted', 'ToolCallFailed']);
        expect(blockEvents[1]).toMatchObject({ error_code: 'worker_lost' });
        expect(events.filter((event) => event.kind === 'ProviderResponseReceived')).toHaveLength(2);
      } finally {
        await second.close();
        await client.close();
      }
    });

    it("does not count a delivery lost to a dead worker against the tool's retries", async () => {
      const { start, counter, client } = setup('lost-not-retry');
      const first = await start();
      const { run_id } = await client.enqueue({ agent: 'flaky_agent', input: 'go' });
      await first.exited;
      const second = await start();
      const run = await client.wait(run_id, { timeout_ms: 30_000 });
      expect(run.status).toBe('completed');
      expect(await counter('crash_then_flaky')).toBe(3);
      const events = await collect(client, run_id);
      assertEventInvariants(events);
      expect(events.filter((event) => 'tool_call_id' in event).map((event) => event.kind)).toEqual(['ToolCallStarted', 'ToolCallStarted', 'ToolCallStarted', 'ToolCallCompleted']);
      // The worker's log: JSON lines with time, level, worker and call ids, and the handler's error with its stack.
      const failure = second
        .stderr()
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .find((line) => line.message === 'tool handler failed');
      expect(failure).toMatchObject({
        level: 'error',
        worker_id: second.id,
        run_id,
        step_id: 's1',
        iteration: 1,
        tool_call_id: 'call_1',
        tool: 'crash_then_flaky',
        error: { name: 'Error', message: 'flaky' },
      });
      expect(String((failure!.error as { stack: string }).stack)).toContain('crash-agents.ts');
      expect(Date.parse(String(failure!.time))).not.toBeNaN();
      await client.close();
    });

    it('does not call the model again for a response recorded before the worker died', async () => {
      const server = await startFakeOpenAI({
        turns: [
          { type: 'tools', calls: [{ id: 'call_b', name: 'block', arguments: {} }] },
          { type: 'text', content: 'finished' },
        ],
      });
      try {
        const { start, counter, client } = setup('kill-provider');
        const openai = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: 'test' };
        const first = await start(openai);
        const { run_id } = await client.enqueue({ agent: 'eager_agent', input: 'go' });
        // legacy_eager runs the call inside the provider job: the kill lands after the response was recorded.
        await until(async () => (await counter('block')) === 1);
        expect(hasEvent(await collect(client, run_id), 'ProviderResponseReceived')).toBe(true);
        first.kill('SIGKILL');
        await first.exited;
        await start(openai);
        const run = await client.wait(run_id, { timeout_ms: 30_000 });
        expect(run.status).toBe('completed');
        expect(run.output).toBe('finished');
        expect(server.requests).toHaveLength(2);
        expect(server.requests[1]?.body.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'call_b', content: 'block done on execution 2' });
        const events = await collect(client, run_id);
        assertEventInvariants(events);
        expect(events.filter((event) => event.kind === 'ProviderResponseReceived')).toHaveLength(2);
        expect(run.usage.total).toBe(38);
        await client.close();
      } finally {
        await server.close();
      }
    });

    it('drains on SIGTERM: the in-flight tool finishes and the process exits 0', async () => {
      const { start, counter, client } = setup('drain');
      const worker = await start();
      const { run_id } = await client.enqueue({ agent: 'load_agent', input: 'go' });
      await until(async () => (await counter('slow')) >= 1);
      const code = await worker.stop();
      expect(code).toBe(0);
      const events = await collect(client, run_id);
      const started = events.filter((event) => event.kind === 'ToolCallStarted').length;
      const ended = events.filter((event) => event.kind === 'ToolCallCompleted').length;
      expect(started).toBeGreaterThan(0);
      expect(ended).toBe(started);
      await start();
      expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
      await client.close();
    });

    it('shares tool jobs between two worker processes', async () => {
      const { prefix, start, client, reader } = setup('share');
      await Promise.all([start(), start()]);
      const ids = await Promise.all(Array.from({ length: 8 }, (_, index) => client.enqueue({ agent: 'load_agent', input: `go ${index}` })));
      const runs = await Promise.all(ids.map(({ run_id }) => client.wait(run_id, { timeout_ms: 30_000 })));
      expect(runs.every((run) => run.status === 'completed')).toBe(true);
      const perPid = Object.values(await reader().hgetall(`{${prefix}}:test:pids`)).map(Number);
      expect(perPid).toHaveLength(2);
      expect(perPid.reduce((a, b) => a + b, 0)).toBe(32);
      expect(Math.min(...perPid)).toBeGreaterThan(0);
      await client.close();
    });
  });
}
