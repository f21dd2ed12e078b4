import { Agent, type ProviderRequest, Workflow, silentLogger, tool } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { TEST_REDIS_URL, assertEventInvariants, reply, testPrefix, toolCalls } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { FAST, collect, testResources, until } from './harness.ts';

// Some OpenAI-compatible servers give every call the same well-formed id ("call_0"), turn after
// turn and step after step; approvals are addressed by tool_call_id, so such ids must not mix calls up.
const { prefixes, open } = testResources();

const refund = (approval_timeout_ms = 60_000) =>
  tool({
    name: 'same_id_refund',
    description: 'needs a person',
    input_schema: { type: 'object' },
    needs_approval: true,
    approval_timeout_ms,
    handler: async () => 'refunded',
  });
/** A model that answers a tool result with text, and anything else with one call, always with id `same`. */
const sameIdModel = (turnsWithTools = 1) => ({
  id: 'fixture',
  defaultModel: 'm',
  complete: async (request: ProviderRequest) =>
    request.messages.filter((message) => message.role === 'tool').length >= turnsWithTools ? reply('done') : toolCalls([{ name: 'same_id_refund', args: {}, id: 'same' }]),
});

async function setup(name: string, agents: (Agent | Workflow)[], turnsWithTools: number) {
  const prefix = testPrefix(name);
  prefixes.push(prefix);
  open.push(await startWorker({ agents, provider: sameIdModel(turnsWithTools), redis: TEST_REDIS_URL, prefix, logger: silentLogger, ...FAST }));
  const client = createClient({ redis: TEST_REDIS_URL, prefix });
  open.push(client);
  return client;
}

describe('approvals of calls that share an id', () => {
  it("does not let an earlier call's timeout time out a later call of the same id", async () => {
    const client = await setup('same-id-timeout', [new Agent({ name: 'same_id_agent', tools: [refund(4_000)], loop_detection: false })], 2);
    const { run_id } = await client.enqueue({ agent: 'same_id_agent', input: 'go' });
    const waitingIn = (iteration: number) => until(async () => (await client.get(run_id))?.pending_approvals?.[0]?.iteration === iteration, 10_000);
    await waitingIn(1);
    const started = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await client.approve(run_id, 'same', { approved: true })).toMatchObject({ approved: true });
    await waitingIn(2);
    // The first call's timeout comes due at 4 s; the second call's, requested after 2 s, at 6 s.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + 5_000 - Date.now())));
    expect(await client.approve(run_id, 'same', { approved: true, by: 'late' })).toMatchObject({ approved: true, by: 'late' });
    const run = await client.wait(run_id, { timeout_ms: 10_000 });
    expect(run).toMatchObject({ status: 'completed', output: 'done' });
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    expect(events.filter((event) => event.kind === 'ToolCallCompleted')).toHaveLength(2);
  });

  it('lets one of two parallel steps wait under an id and fails the other call, instead of leaving the first waiting for ever', async () => {
    const agent = new Agent({ name: 'same_id_step', tools: [refund()] });
    const flow = new Workflow({
      name: 'same_id_flow',
      steps: [
        { id: 'left', agent },
        { id: 'right', agent },
      ],
    });
    const client = await setup('same-id-parallel', [flow], 1);
    const { run_id } = await client.enqueue({ agent: 'same_id_flow', input: 'go' });
    // One call waits; the other, asking under the same id while the first waits, is answered as failed.
    await until(async () => (await collect(client, run_id)).some((event) => event.kind === 'ToolCallFailed'), 10_000);
    const waiting = (await client.get(run_id))?.pending_approvals ?? [];
    expect(waiting).toHaveLength(1);
    expect(await client.approve(run_id, 'same', { approved: true })).toMatchObject({ approved: true });
    const run = await client.wait(run_id, { timeout_ms: 10_000 });
    expect(run.status).toBe('completed');
    const events = await collect(client, run_id);
    assertEventInvariants(events);
    const failed = events.filter((event) => event.kind === 'ToolCallFailed');
    expect(failed).toMatchObject([{ tool_call_id: 'same', error_code: 'tool_error' }]);
    expect(failed[0]!.step_id).not.toBe(waiting[0]!.step_id);
    expect(events.filter((event) => event.kind === 'ToolCallCompleted')).toMatchObject([{ step_id: waiting[0]!.step_id }]);
  });
});
