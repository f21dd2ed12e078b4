import { Agent, Workflow, silentLogger, tool } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, cleanupPrefix, scriptedProvider, testPrefix } from '@arcflow/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { until } from './harness.ts';

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
