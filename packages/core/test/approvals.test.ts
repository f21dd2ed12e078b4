import { Agent, type ApprovalRequest, type TraceEvent, Workflow, runLocal, tool } from '@arcflow/core';
import { assertEventInvariants, capturingLogger, reply, scriptedProvider, toolCalls } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';

function clerk(approvalTimeoutMs?: number) {
  const executed: string[] = [];
  const refund = tool({
    name: 'refund',
    description: 'Refund an order',
    input_schema: { type: 'object', properties: { order: { type: 'string' } }, required: ['order'] },
    needs_approval: true,
    ...(approvalTimeoutMs ? { approval_timeout_ms: approvalTimeoutMs } : {}),
    handler: async ({ order }: { order: string }) => {
      executed.push(order);
      return `refunded ${order}`;
    },
  });
  const lookup = tool({ name: 'lookup', description: 'Look up', input_schema: { type: 'object' }, handler: async () => 'found' });
  const payout = tool({
    name: 'payout',
    description: 'Pay out',
    input_schema: { type: 'object', properties: { amount: { type: 'number' } }, required: ['amount'] },
    needs_approval: ({ amount }: { amount: number }) => amount > 100,
    handler: async ({ amount }: { amount: number }) => `paid ${amount}`,
  });
  return { agent: new Agent({ name: 'clerk', tools: [refund, lookup, payout], loop_detection: false }), executed };
}

const lastAnswer = (model: ReturnType<typeof scriptedProvider>) =>
  (model.requests.at(-1)?.messages ?? []).filter((message) => message.role === 'tool').map((message) => (message as { content: string }).content);
const kinds = (events: readonly TraceEvent[], kind: string) => events.filter((event) => event.kind === kind);

describe('runLocal: approvals, answered by the approve option', () => {
  it('runs approved calls after their siblings, rejects with the exact text, and asks once per call with its arguments', async () => {
    const { agent, executed } = clerk();
    const model = scriptedProvider([
      toolCalls([
        { name: 'lookup', args: {}, id: 'c1' },
        { name: 'refund', args: { order: 'r1' }, id: 'c2' },
        { name: 'refund', args: { order: 'r2' }, id: 'c3' },
      ]),
      reply('done'),
    ]);
    const asked: ApprovalRequest[] = [];
    const run = await runLocal(agent, 'go', {
      provider: model,
      approve: async (request) => {
        asked.push(request);
        return request.tool_call_id === 'c2' ? { approved: true, by: 'alice' } : { approved: false, reason: 'not this one', by: 'bob' };
      },
    });
    assertEventInvariants(run.events);
    expect(run.status).toBe('completed');
    expect(asked).toEqual([
      { step_id: 's1', iteration: 1, tool_call_id: 'c2', tool_name: 'refund', arguments: { order: 'r1' } },
      { step_id: 's1', iteration: 1, tool_call_id: 'c3', tool_name: 'refund', arguments: { order: 'r2' } },
    ]);
    expect(executed).toEqual(['r1']);
    expect(lastAnswer(model)).toEqual(['found', 'refunded r1', 'Error: the user rejected this call — not this one']);
    expect(kinds(run.events, 'ToolApprovalResolved')).toEqual([
      expect.objectContaining({ tool_call_id: 'c2', approved: true, by: 'alice' }),
      expect.objectContaining({ tool_call_id: 'c3', approved: false, by: 'bob' }),
    ]);
    expect(run.events.find((event) => event.kind === 'ToolCallFailed')).toMatchObject({ tool_call_id: 'c3', error_code: 'rejected' });
    expect(run.events.filter((event) => event.kind === 'ToolCallStarted' && event.tool_call_id === 'c3')).toEqual([]);
  });

  it('legacy_eager: a call waiting for approval holds back none of its siblings; results still go back in call order', async () => {
    const { agent: base } = clerk();
    const agent = new Agent({ name: 'eager_clerk', tools: base.tools, loop_detection: false, tool_execution: { mode: 'legacy_eager' } });
    const model = scriptedProvider([
      toolCalls([
        { name: 'refund', args: { order: 'r1' }, id: 'c1' },
        { name: 'lookup', args: {}, id: 'c2' },
      ]),
      reply('done'),
    ]);
    const run = await runLocal(agent, 'go', {
      provider: model,
      approve: async () => {
        await new Promise((resolve) => setTimeout(resolve, 50));
        return { approved: true };
      },
      logger: false,
    });
    const order = run.events
      .filter((event) => event.kind === 'ToolCallStarted' || event.kind === 'ToolApprovalResolved')
      .map((event) => `${event.kind} ${(event as { tool_call_id: string }).tool_call_id}`);
    expect(order.indexOf('ToolCallStarted c2')).toBeLessThan(order.indexOf('ToolApprovalResolved c1'));
    expect(lastAnswer(model)).toEqual(['refunded r1', 'found']);
  });

  it('rejects with `no approver` without an approve option; decides per call with a needs_approval function', async () => {
    const { agent } = clerk();
    const model = scriptedProvider([
      toolCalls([
        { name: 'payout', args: { amount: 500 }, id: 'big' },
        { name: 'payout', args: { amount: 5 }, id: 'small' },
      ]),
      reply('done'),
    ]);
    const run = await runLocal(agent, 'go', { provider: model });
    expect(lastAnswer(model)).toEqual(['Error: the user rejected this call — no approver', 'paid 5']);
    expect(kinds(run.events, 'ToolApprovalRequested').map((event) => (event as { tool_call_id: string }).tool_call_id)).toEqual(['big']);
  });

  it('asks for approval when a needs_approval function returns anything but a boolean (an async function), saying why', async () => {
    let ran = 0;
    const refund = tool({
      name: 'refund',
      description: 'Refunds',
      input_schema: { type: 'object' },
      needs_approval: (async () => false) as never,
      handler: () => {
        ran += 1;
        return 'refunded';
      },
    });
    const logger = capturingLogger();
    const model = scriptedProvider([toolCalls([{ name: 'refund', args: {}, id: 'r1' }]), reply('done')]);
    const asked: string[] = [];
    const run = await runLocal(new Agent({ name: 'async_rule', tools: [refund] }), 'go', {
      provider: model,
      logger,
      approve: async (request) => {
        asked.push(request.tool_call_id);
        return { approved: false, reason: 'checked by hand' };
      },
    });
    expect(run.status).toBe('completed');
    expect(asked).toEqual(['r1']);
    expect(ran).toBe(0);
    expect(logger.lines.some((line) => line.includes('needs_approval returned a Promise, not true or false; the call waits for approval'))).toBe(true);
  });

  it('times a call out after approval_timeout_ms, with no ToolApprovalResolved; waits again in the next iteration', async () => {
    const { agent } = clerk(200);
    const model = scriptedProvider([
      toolCalls([{ name: 'refund', args: { order: 'slow' }, id: 'first' }]),
      toolCalls([{ name: 'refund', args: { order: 'next' }, id: 'second' }]),
      reply('done'),
    ]);
    const run = await runLocal(agent, 'go', {
      provider: model,
      approve: (request) => (request.tool_call_id === 'first' ? new Promise(() => undefined) : { approved: true }),
    });
    assertEventInvariants(run.events);
    expect(run.status).toBe('completed');
    expect(run.events.find((event) => event.kind === 'ToolCallFailed')).toMatchObject({ tool_call_id: 'first', error_code: 'approval_timeout' });
    expect(kinds(run.events, 'ToolApprovalResolved')).toEqual([expect.objectContaining({ tool_call_id: 'second', approved: true })]);
    expect(lastAnswer(model)).toEqual(['Error: approval timed out', 'refunded next']);
  });

  it('cancels a waiting call when the run is cancelled, running nothing', async () => {
    const { agent, executed } = clerk();
    const controller = new AbortController();
    const run = await runLocal(agent, 'go', {
      provider: scriptedProvider([toolCalls([{ name: 'refund', args: { order: 'r' }, id: 'w' }]), reply('never')]),
      signal: controller.signal,
      approve: () => {
        setTimeout(() => controller.abort(), 20);
        return new Promise(() => undefined);
      },
    });
    expect(run.status).toBe('cancelled');
    expect(executed).toEqual([]);
    expect(run.events.find((event) => event.kind === 'ToolCallFailed')).toMatchObject({ tool_call_id: 'w', error_code: 'cancelled' });
  });
});

describe("runLocal: a workflow's tool step whose tool needs approval", () => {
  const flow = (refund: ReturnType<typeof clerk>['agent']['tools'][number]) =>
    new Workflow({
      name: 'pay_flow',
      steps: [
        { id: 'pay', tool: refund, args: () => ({ order: 'o7' }) },
        { id: 'after', agent: new Agent({ name: 'after' }), depends_on: ['pay'] },
      ],
    });
  const exec_config = { test: { steps: { after: { output: 'after done' } } } };

  it('asks the approve option once with the step call, and runs the tool once approved', async () => {
    const { agent, executed } = clerk();
    const asked: ApprovalRequest[] = [];
    const run = await runLocal(flow(agent.tools[0]!), '{}', {
      logger: false,
      provider: scriptedProvider([]),
      exec_config,
      approve: (request) => {
        asked.push(request);
        return { approved: true, by: 'alice' };
      },
    });
    expect(asked).toEqual([{ step_id: 'pay', iteration: 1, tool_call_id: 'pay', tool_name: 'refund', arguments: { order: 'o7' } }]);
    expect(run).toMatchObject({ status: 'completed', steps: { pay: { output: 'refunded o7' } } });
    expect(executed).toEqual(['o7']);
    expect(kinds(run.events, 'ToolApprovalResolved')).toEqual([expect.objectContaining({ tool_call_id: 'pay', approved: true, by: 'alice' })]);
    assertEventInvariants(run.events);
  });

  it('rejects with `no approver` without an approve option: the step fails `rejected`', async () => {
    const { agent, executed } = clerk();
    const run = await runLocal(flow(agent.tools[0]!), '{}', { logger: false, provider: scriptedProvider([]), exec_config });
    expect(run).toMatchObject({ status: 'failed', steps: { pay: { status: 'failed', error: { error_code: 'rejected' } }, after: { status: 'skipped' } } });
    expect(executed).toEqual([]);
  });
});
