import { Agent, Workflow, silentLogger, tool } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, scriptedProvider, testPrefix } from '@arcflow/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { collect, until } from './harness.ts';

// SPEC §10 in a workflow run: the run is `waiting` while at least one call waits and no job of the
// run is queued or active; a step still working beside a waiting one keeps it `running`.

const prefix = testPrefix('workflow-waiting');
afterAll(() => cleanupPrefix(prefix));

describe('a workflow run with a call waiting for approval', () => {
  it('is running while another step works, waiting once that step has ended, and running again when approved', async () => {
    let release = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    let started = false;
    const refund = tool({ name: 'ww_refund', description: 'refunds', input_schema: { type: 'object' }, needs_approval: true, handler: () => 'refunded' });
    const gate = tool({
      name: 'ww_gate',
      description: 'waits to be released',
      input_schema: { type: 'object' },
      handler: async () => {
        started = true;
        await released;
        return 'through';
      },
    });
    const flow = new Workflow({
      name: 'ww_flow',
      steps: [
        { id: 'A', agent: new Agent({ name: 'ww_a', tools: [refund] }) },
        { id: 'B', agent: new Agent({ name: 'ww_b', tools: [gate] }) },
      ],
    });
    const worker = await startWorker({ agents: [flow], provider: scriptedProvider([]), redis: TEST_REDIS_URL, prefix, logger: silentLogger });
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    try {
      const exec_config = {
        test: {
          steps: {
            A: { responses: [{ tool_calls: [{ name: 'ww_refund', arguments: {}, id: 'c1' }] }, { output: 'A done' }] },
            B: { responses: [{ tool_calls: [{ name: 'ww_gate', arguments: {} }] }, { output: 'B done' }] },
          },
        },
      };
      const { run_id } = await client.enqueue({ agent: 'ww_flow', input: 'go', exec_config });
      await until(async () => started && (await client.get(run_id))?.pending_approvals?.length === 1);
      // B's tool job is active: the run is running, though A's call waits.
      for (let check = 0; check < 3; check += 1) {
        expect((await client.get(run_id))?.status).toBe('running');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      release();
      await until(async () => (await client.get(run_id))?.steps?.B?.status === 'completed');
      // Only A's waiting call is left: the run waits.
      expect((await client.get(run_id))?.status).toBe('waiting');
      await client.approve(run_id, 'c1', { approved: true });
      expect(await client.wait(run_id, { timeout_ms: 20_000 })).toMatchObject({ status: 'completed', steps: { A: { output: 'A done' }, B: { output: 'B done' } } });
    } finally {
      release();
      await client.close();
      await worker.close();
    }
  });
});

describe("a workflow's tool step whose tool needs approval (SPEC §10)", () => {
  async function setup(name: string) {
    const executions: unknown[] = [];
    const refund = tool({
      name: `${name}_refund`,
      description: 'refunds',
      input_schema: { type: 'object', properties: { order: { type: 'string' } }, required: ['order'] },
      needs_approval: true,
      handler: ({ order }: { order: string }) => {
        executions.push(order);
        return `refunded ${order}`;
      },
    });
    const flow = new Workflow({
      name: `${name}_flow`,
      steps: [
        { id: 'pay', tool: refund, args: () => ({ order: 'o7' }) },
        { id: 'after', agent: new Agent({ name: `${name}_after` }), depends_on: ['pay'] },
      ],
    });
    const worker = await startWorker({ agents: [flow], provider: scriptedProvider([]), redis: TEST_REDIS_URL, prefix, logger: silentLogger });
    const client = createClient({ redis: TEST_REDIS_URL, prefix });
    const { run_id } = await client.enqueue({ agent: `${name}_flow`, input: '{}', exec_config: { test: { steps: { after: { output: 'after done' } } } } });
    await until(async () => (await client.get(run_id))?.status === 'waiting');
    const close = async () => {
      await client.close();
      await worker.close();
    };
    return { client, run_id, executions, close };
  }

  it('waits with the call in pending_approvals, runs nothing, and runs the tool once approved', async () => {
    const { client, run_id, executions, close } = await setup('wta');
    try {
      const waiting = await client.get(run_id);
      expect(waiting?.pending_approvals).toEqual([
        expect.objectContaining({ step_id: 'pay', iteration: 1, tool_call_id: 'pay', tool_name: 'wta_refund', arguments: { order: 'o7' } }),
      ]);
      expect(executions).toEqual([]);
      const requested = (await collect(client, run_id)).filter((event) => event.kind === 'ToolApprovalRequested');
      expect(requested).toEqual([expect.objectContaining({ step_id: 'pay', iteration: 1, tool_call_id: 'pay', tool_name: 'wta_refund' })]);
      await client.approve(run_id, 'pay', { approved: true, by: 'alice' });
      const done = await client.wait(run_id, { timeout_ms: 20_000 });
      expect(done).toMatchObject({ status: 'completed', steps: { pay: { status: 'completed', output: 'refunded o7' }, after: { output: 'after done' } } });
      expect(executions).toEqual(['o7']);
    } finally {
      await close();
    }
  });

  it('fails the step with the call rejected, and skips what depends on it', async () => {
    const { client, run_id, executions, close } = await setup('wtr');
    try {
      await client.approve(run_id, 'pay', { approved: false, reason: 'not today' });
      const done = await client.wait(run_id, { timeout_ms: 20_000 });
      expect(done).toMatchObject({
        status: 'failed',
        error: { error_code: 'step_failed' },
        steps: { pay: { status: 'failed', error: { error_code: 'rejected' } }, after: { status: 'skipped' } },
      });
      expect(executions).toEqual([]);
    } finally {
      await close();
    }
  });
});
