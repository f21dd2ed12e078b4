import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { RunRecord, TraceEvent } from '@arcflow/core';
import { createClient } from '@arcflow/queue';
import { assertEventInvariants } from '@arcflow/testing';
import { ARCFLOW_BIN } from '@arcflow/worker';
import { describe, expect, it } from 'vitest';
import { collect, fixtureWorkers, redisTargets, until as untilEvery } from './harness.ts';

const run = promisify(execFile);
const until = (check: () => Promise<boolean>, timeoutMs = 20_000) => untilEvery(check, timeoutMs, 50);
const ofKind = (events: TraceEvent[], kind: string) => events.filter((event) => event.kind === kind);
const terminalsOf = (events: TraceEvent[], id: string) =>
  events.filter(
    (event) => 'tool_call_id' in event && event.tool_call_id === id && ['ToolCallCompleted', 'ToolCallFailed', 'ToolInputValidationFailed', 'LoopDetected'].includes(event.kind),
  );

const FIXTURE = new URL('./fixtures/approval-agents.ts', import.meta.url).pathname;

for (const target of redisTargets()) defineApprovalTests(target.name, target.url);

function defineApprovalTests(targetName: string, redisUrl: () => string): void {
  const { forTest } = fixtureWorkers(FIXTURE, redisUrl);

  async function setup(name: string, workerCount = 2, args: string[] = []) {
    const { prefix, url, start: startWith, executions } = forTest(name);
    const start = () => startWith({ args });
    const started = await Promise.all(Array.from({ length: workerCount }, start));
    const client = createClient({ redis: url, prefix });
    const waiting = (run_id: string, calls: number) =>
      until(async () => (await client.get(run_id))?.status === 'waiting' && (await client.get(run_id))?.pending_approvals?.length === calls);
    return { prefix, url, client, start, workers: started, executions, waiting };
  }

  describe(`approvals and budgets through two worker processes, on ${targetName}`, () => {
    it('runs the siblings at once and waits for the one call that needs approval; approved, the model gets the three results in call order', async () => {
      const { client, executions, waiting } = await setup('approve-mix');
      const { run_id } = await client.enqueue({ agent: 'clerk', input: 'mix' });
      await waiting(run_id, 1);
      const run = (await client.get(run_id)) as RunRecord;
      expect(run.pending_approvals).toEqual([
        expect.objectContaining({
          step_id: 's1',
          iteration: 1,
          tool_call_id: 'c_refund',
          tool_name: 'refund',
          arguments: { order: 'r1' },
          requested_at: expect.any(Number),
          expires_at: expect.any(Number),
        }),
      ]);
      expect(run.pending_approvals![0]!.expires_at - run.pending_approvals![0]!.requested_at).toBe(86_400_000);
      expect(await executions('lookup')).toBe(2);
      expect(await executions('refund')).toBe(0);
      const before = await collect(client, run_id);
      expect(ofKind(before, 'ToolApprovalRequested')).toEqual([
        expect.objectContaining({ tool_call_id: 'c_refund', tool_name: 'refund', input_schema_hash: expect.any(String), input_size_bytes: 14 }),
      ]);
      expect(JSON.stringify(before)).not.toContain('r1');
      expect(before.filter((event) => event.kind === 'ToolCallStarted' && event.tool_call_id === 'c_refund')).toEqual([]);
      expect(await client.list({ status: 'waiting' })).toMatchObject({ runs: [expect.objectContaining({ run_id })] });

      const resolution = await client.approve(run_id, 'c_refund', { approved: true, by: 'alice' });
      expect(resolution).toEqual({ approved: true, by: 'alice', resolved_at: expect.any(Number) });
      const done = await client.wait(run_id, { timeout_ms: 20_000 });
      expect(done).toMatchObject({ status: 'completed', output: 'found a | refunded r1 | found b' });
      expect(done.pending_approvals).toBeUndefined();
      const events = await collect(client, run_id);
      assertEventInvariants(events);
      expect(ofKind(events, 'ToolApprovalResolved')).toEqual([expect.objectContaining({ tool_call_id: 'c_refund', approved: true, by: 'alice' })]);
      expect(await client.approve(run_id, 'c_refund', { approved: false, reason: 'too late' })).toEqual(resolution);
      await client.close();
    });

    it('tells the model the exact rejection, and ends the call ToolCallFailed (rejected)', async () => {
      const { client, executions, waiting } = await setup('approve-reject');
      const { run_id } = await client.enqueue({ agent: 'clerk', input: 'mix' });
      await waiting(run_id, 1);
      expect(await client.approve(run_id, 'c_refund', { approved: false, reason: 'over the limit', by: 'bob' })).toMatchObject({
        approved: false,
        reason: 'over the limit',
        by: 'bob',
      });
      const done = await client.wait(run_id, { timeout_ms: 20_000 });
      expect(done.output).toBe('found a | Error: the user rejected this call — over the limit | found b');
      expect(await executions('refund')).toBe(0);
      const events = await collect(client, run_id);
      assertEventInvariants(events);
      expect(terminalsOf(events, 'c_refund')).toEqual([expect.objectContaining({ kind: 'ToolCallFailed', error_code: 'rejected' })]);
      expect(ofKind(events, 'ToolApprovalResolved')).toEqual([expect.objectContaining({ approved: false, by: 'bob' })]);
      await client.close();
    });

    it('resolves three waiting calls in reverse order with a worker SIGKILLed between two; the round joins once', async () => {
      const { client, start, workers, executions, waiting } = await setup('approve-three');
      const { run_id } = await client.enqueue({ agent: 'clerk', input: 'three' });
      await waiting(run_id, 3);
      await client.approve(run_id, 'c_x3', { approved: true });
      // Killed once x3's result is recorded (a kill between its handler's start and its record runs it again, as it should).
      await until(async () => (await executions('refund')) === 1 && terminalsOf(await collect(client, run_id), 'c_x3').length === 1);
      workers[0]!.kill('SIGKILL');
      await workers[0]!.exited;
      await client.approve(run_id, 'c_x2', { approved: false, reason: 'no' });
      await start();
      await client.approve(run_id, 'c_x1', { approved: true });
      const done = await client.wait(run_id, { timeout_ms: 30_000 });
      expect(done).toMatchObject({ status: 'completed', output: 'refunded x1 | Error: the user rejected this call — no | refunded x3' });
      const events = await collect(client, run_id);
      assertEventInvariants(events);
      for (const id of ['c_x1', 'c_x2', 'c_x3']) expect(terminalsOf(events, id)).toHaveLength(1);
      expect(ofKind(events, 'ProviderRequestSent').filter((event) => event.iteration === 2)).toHaveLength(1);
      expect(await executions('refund')).toBe(2);
      await client.close();
    });

    it('waits again for approvals in two consecutive iterations', async () => {
      const { client, waiting } = await setup('approve-twice');
      const { run_id } = await client.enqueue({ agent: 'clerk', input: 'twice' });
      await waiting(run_id, 1);
      await client.approve(run_id, 'c_first', { approved: true });
      await until(async () => (await client.get(run_id))?.pending_approvals?.[0]?.tool_call_id === 'c_second');
      expect((await client.get(run_id))?.status).toBe('waiting');
      await client.approve(run_id, 'c_second', { approved: true });
      const done = await client.wait(run_id, { timeout_ms: 20_000 });
      expect(done).toMatchObject({ status: 'completed', output: 'refunded first | refunded second' });
      await client.close();
    });

    it('times a call out once, from Redis-held state, even with two workers; needs_approval decides per call', async () => {
      const { client, executions } = await setup('approve-timeout');
      const { run_id } = await client.enqueue({ agent: 'clerk', input: 'payout' });
      const done = await client.wait(run_id, { timeout_ms: 20_000 });
      expect(done).toMatchObject({ status: 'completed', output: 'Error: approval timed out | paid 5' });
      expect(await executions('payout')).toBe(1);
      const events = await collect(client, run_id);
      assertEventInvariants(events);
      expect(terminalsOf(events, 'c_big')).toEqual([expect.objectContaining({ kind: 'ToolCallFailed', error_code: 'approval_timeout' })]);
      expect(ofKind(events, 'ToolApprovalResolved')).toEqual([]);
      expect(ofKind(events, 'ToolApprovalRequested').map((event) => (event as { tool_call_id: string }).tool_call_id)).toEqual(['c_big']);
      const requested = events.find((event) => event.kind === 'ToolApprovalRequested')!.ts;
      const failed = terminalsOf(events, 'c_big')[0]!.ts;
      expect(failed - requested).toBeGreaterThanOrEqual(1_000);
      expect(failed - requested).toBeLessThan(6_000);
      await expect(client.approve(run_id, 'c_big', { approved: true })).resolves.toMatchObject({ approved: false, timed_out: true });
      await client.close();
    });

    it('settles a call once when its approval arrives as its timeout fires', async () => {
      const { client } = await setup('approve-vs-timeout');
      for (let round = 0; round < 3; round += 1) {
        const { run_id } = await client.enqueue({ agent: 'clerk', input: `payout ${round}` });
        await until(async () => ((await client.get(run_id))?.pending_approvals?.length ?? 0) === 1);
        const { expires_at } = (await client.get(run_id))!.pending_approvals![0]!;
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, expires_at - Date.now())));
        const resolution = await client.approve(run_id, 'c_big', { approved: true, by: 'late' });
        const done = await client.wait(run_id, { timeout_ms: 20_000 });
        const events = await collect(client, run_id);
        assertEventInvariants(events);
        expect(terminalsOf(events, 'c_big')).toHaveLength(1);
        if (resolution.timed_out) {
          expect(done.output).toBe('Error: approval timed out | paid 5');
          expect(ofKind(events, 'ToolApprovalResolved')).toEqual([]);
        } else {
          expect(done.output).toBe('paid 500 | paid 5');
          expect(ofKind(events, 'ToolApprovalResolved')).toHaveLength(1);
        }
      }
      await client.close();
    });

    it('resolves once under two concurrent approvals, refuses calls that are not waiting, and cancels a waiting run without running anything', async () => {
      const { prefix, url, client, executions, waiting } = await setup('approve-race');
      const other = createClient({ redis: url, prefix });
      const { run_id } = await client.enqueue({ agent: 'clerk', input: 'mix' });
      await waiting(run_id, 1);
      const [first, second] = await Promise.all([
        client.approve(run_id, 'c_refund', { approved: true, by: 'one' }),
        other.approve(run_id, 'c_refund', { approved: false, by: 'two' }),
      ]);
      expect(first).toEqual(second);
      await client.wait(run_id, { timeout_ms: 20_000 });
      const events = await collect(client, run_id);
      expect(ofKind(events, 'ToolApprovalResolved')).toHaveLength(1);
      await expect(client.approve(run_id, 'c_look_a', { approved: true })).rejects.toMatchObject({
        code: 'not_pending',
        message: `tool call 'c_look_a' never waited for approval in run '${run_id}'`,
      });
      await expect(client.approve(run_id, 'c_refund', { approved: 'yes' as never })).rejects.toMatchObject({ code: 'invalid_request' });

      const { run_id: cancelled } = await client.enqueue({ agent: 'clerk', input: 'three' });
      await waiting(cancelled, 3);
      const refundsBefore = await executions('refund');
      expect(await client.cancel(cancelled)).toEqual({ cancelled: true, status: 'cancelled' });
      await expect(client.approve(cancelled, 'c_x1', { approved: true })).rejects.toMatchObject({
        code: 'not_pending',
        message: expect.stringContaining('the run has ended (cancelled)'),
      });
      const cancelledEvents = await collect(client, cancelled);
      assertEventInvariants(cancelledEvents);
      for (const id of ['c_x1', 'c_x2', 'c_x3']) expect(terminalsOf(cancelledEvents, id)).toEqual([expect.objectContaining({ kind: 'ToolCallFailed', error_code: 'cancelled' })]);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await executions('refund')).toBe(refundsBefore);
      await other.close();
      await client.close();
    });

    it('is listed, inspected and approved from the command line', async () => {
      const { prefix, url, client, waiting } = await setup('approve-cli');
      const { run_id } = await client.enqueue({ agent: 'clerk', input: 'mix' });
      await waiting(run_id, 1);
      const cli = (...args: string[]) => run(process.execPath, [ARCFLOW_BIN, ...args], { env: { ...process.env, REDIS_URL: url, ARCFLOW_PREFIX: prefix } });
      expect((await cli('runs', '--status', 'waiting')).stdout).toContain(run_id);
      const inspected = (await cli('inspect', run_id)).stdout;
      expect(inspected).toContain(`waiting for approval: c_refund refund {"order":"r1"} (arcflow approve ${run_id} c_refund [--reject])`);
      expect(inspected).toMatch(/refund c_refund {2}waiting for approval/);
      expect((await cli('get', run_id)).stdout).toMatch(/waiting {4}c_refund {2}refund {"order":"r1"}/);
      expect((await cli('approve', run_id, 'c_refund', '--reject', '--reason', 'not today', '--by', 'carol')).stdout.trim()).toBe('c_refund rejected by carol: not today');
      expect((await client.wait(run_id, { timeout_ms: 20_000 })).output).toBe('found a | Error: the user rejected this call — not today | found b');
      const again = await cli('approve', run_id, 'c_look_a').catch((error: { stderr: string; code: number }) => error);
      expect(again).toMatchObject({ code: 1, stderr: expect.stringContaining('never waited for approval') });
      await client.close();
    });

    it('fails a run over its budget (config.budget) before any call of the crossing response runs', async () => {
      const { client, executions } = await setup('budget-processes');
      const { run_id } = await client.enqueue({ agent: 'clerk', input: 'mix', config: { budget: { max_tool_calls: 2 } } });
      const run = await client.wait(run_id, { timeout_ms: 20_000 });
      expect(run).toMatchObject({ status: 'failed', error: { error_code: 'budget_exceeded' } });
      expect(await executions('lookup')).toBe(0);
      const events = await collect(client, run_id);
      expect(ofKind(events, 'ToolApprovalRequested')).toEqual([]);
      expect(events.at(-1)).toMatchObject({ kind: 'RunFailed', error_code: 'budget_exceeded' });
      await client.close();
    });

    it('holds no worker slot while waiting: with concurrency 1 everywhere, other runs complete', async () => {
      const { client, waiting } = await setup('approve-slots', 2, ['--concurrency', '1']);
      const waitingRuns = await Promise.all([1, 2, 3].map(() => client.enqueue({ agent: 'clerk', input: 'mix' })));
      for (const { run_id } of waitingRuns) await waiting(run_id, 1);
      const others = await Promise.all([1, 2, 3, 4].map((n) => client.enqueue({ agent: 'clerk', input: `plain ${n}` })));
      for (const { run_id } of others) expect((await client.wait(run_id, { timeout_ms: 20_000 })).status).toBe('completed');
      for (const { run_id } of waitingRuns) expect((await client.get(run_id))?.status).toBe('waiting');
      await client.close();
    });
  });
}
