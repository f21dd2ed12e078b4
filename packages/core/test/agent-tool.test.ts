import {
  Agent,
  AGENT_TOOL_INPUT_SCHEMA,
  ConfigError,
  type ModelProvider,
  ProviderFailure,
  type ProviderRequest,
  type TraceEvent,
  Workflow,
  agentTool,
  childBudget,
  childOf,
  runLocal,
  tool,
} from '@arcflow/core';
import { assertEventInvariants, childrenInTestMode, reply, toolCalls } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';

// SPEC §13 on runLocal: an agent tool's call runs a child run in this process.

const researcher = new Agent({ name: 'researcher', instructions: 'role:researcher', role: 'Looks things up' });

/** Answers by role: the researcher echoes its input (500 tokens); others ask their first tool once, then answer with its result. */
function byRole(
  calls: (request: ProviderRequest) => { name: string; args: unknown }[] = (request) => [{ name: request.tools[0]!.name, args: { input: 'q' } }],
): ModelProvider & { requests: ProviderRequest[] } {
  const requests: ProviderRequest[] = [];
  return {
    id: 'roles',
    defaultModel: 'm',
    requests,
    async complete(request) {
      requests.push(request);
      const system = String(request.messages[0]?.content ?? '');
      const user = String([...request.messages].reverse().find((message) => message.role === 'user')?.content ?? '');
      if (system.includes('role:researcher')) return reply(`researched ${user}`, { input: 400, output: 100, total: 500 });
      const results = request.messages.filter((message) => message.role === 'tool').map((message) => message.content);
      if (results.length > 0 || request.tools.length === 0) return reply(`got: ${results.join(' | ') || 'nothing'}`);
      return toolCalls(calls(request));
    },
  };
}

describe('agentTool', () => {
  it('defaults to the agent name, its role as description and an { input: string } schema', () => {
    const made = agentTool(researcher);
    expect(made).toMatchObject({ kind: 'tool', name: 'researcher', description: 'Looks things up', input_schema: AGENT_TOOL_INPUT_SCHEMA, retries: 3 });
    expect(childOf(made)).toMatchObject({ agent: researcher, max_depth: 4 });
    expect(made.check({ input: 'x' })).toBeUndefined();
    expect(made.check({})).toMatch(/input/);
  });

  it('refuses what cannot work, naming it', () => {
    expect(() => agentTool({} as Agent)).toThrow(new ConfigError('agentTool: the first argument must be an Agent'));
    expect(() => agentTool(researcher, { max_depth: 0 })).toThrow("agentTool 'researcher': max_depth must be an integer >= 1, got 0");
    expect(() => agentTool(researcher, { name: 'has space' })).toThrow(/name must match/);
    expect(() => agentTool(researcher, { retries: 2 } as never)).toThrow(/unknown option 'retries' in agentTool 'researcher'/);
    const made = agentTool(researcher);
    expect(() => new Workflow({ name: 'w', steps: [{ id: 'a', tool: made }] })).toThrow(
      "workflow 'w': step 'a': 'researcher' is an agent tool; make the step an agent step ({ agent }) instead",
    );
  });
});

describe('agent tools on runLocal', () => {
  it("runs each call's child in this process and answers with the children's answers in call order", async () => {
    const coordinator = new Agent({ name: 'coordinator', tools: [agentTool(researcher)] });
    const provider = byRole(() => [
      { name: 'researcher', args: { input: 'a' } },
      { name: 'researcher', args: { input: 'b' } },
    ]);
    const events: TraceEvent[] = [];
    const run = await runLocal(coordinator, 'go', { provider, logger: false, onEvent: (event) => events.push(event) });
    expect(run).toMatchObject({ status: 'completed', output: 'got: researched a | researched b' });
    assertEventInvariants(run.events);
    const started = run.events.filter((event) => event.kind === 'ToolCallStarted');
    const children = started.map((event) => (event as { child_run_id?: string }).child_run_id!);
    expect(new Set(children).size).toBe(2);
    // Each child's events reach onEvent under its own run id, complete.
    for (const child of children) {
      const own = events.filter((event) => event.run_id === child);
      expect(own.at(0)).toMatchObject({ kind: 'RunEnqueued', agent: 'researcher' });
      expect(own.at(-1)).toMatchObject({ kind: 'RunCompleted' });
      assertEventInvariants(own);
    }
    // The run's own usage is its own calls only.
    expect(run.usage.total).toBe(30);
  });

  it('fails the call child_failed when the child fails, and the run goes on', async () => {
    const failing = new Agent({ name: 'failing', instructions: 'role:failing' });
    const boss = new Agent({ name: 'boss', tools: [agentTool(failing)] });
    const roles = byRole();
    const provider: ModelProvider = {
      ...roles,
      complete: async (request) => {
        if (String(request.messages[0]?.content ?? '').includes('role:failing')) throw new ProviderFailure('bad_request', 'no', { retryable: false });
        return roles.complete(request);
      },
    };
    const run = await runLocal(boss, 'go', { provider, logger: false });
    expect(run).toMatchObject({ status: 'completed', output: 'got: Error: sub-agent failed — provider_error' });
    expect(run.events.find((event) => event.kind === 'ToolCallFailed')).toMatchObject({ tool_name: 'failing', error_code: 'child_failed' });
  });

  it('counts a child’s tokens toward the parent’s budget', async () => {
    const thrifty = new Agent({ name: 'thrifty', tools: [agentTool(researcher)], budget: { max_total_tokens: 400 } });
    let asked = 0;
    const provider = byRole(() => [{ name: 'researcher', args: { input: `q${++asked}` } }]);
    // Ask twice: the second response asks again after a child of 500 tokens.
    const again: ModelProvider = {
      ...provider,
      complete: async (request) =>
        request.messages.filter((message) => message.role === 'tool').length === 1 && !String(request.messages[0]?.content ?? '').includes('role:researcher')
          ? toolCalls([{ name: 'researcher', args: { input: 'q2' } }])
          : provider.complete(request),
    };
    const run = await runLocal(thrifty, 'go', { provider: again, logger: false });
    expect(run).toMatchObject({ status: 'failed', error: { error_code: 'budget_exceeded' } });
  });

  it("starts a child with what the parent's budget leaves, below the child's own caps", async () => {
    const spender = new Agent({
      name: 'spender',
      instructions: 'role:spender',
      tools: [tool({ name: 'noop', description: 'd', input_schema: { type: 'object' }, handler: () => 'ok' })],
    });
    const boss = new Agent({ name: 'boss', tools: [agentTool(spender)], budget: { max_total_tokens: 400 } });
    const roles = byRole();
    const provider: ModelProvider = {
      ...roles,
      complete: async (request) =>
        String(request.messages[0]?.content ?? '').includes('role:spender')
          ? toolCalls([{ name: 'noop', args: {} }], { input: 450, output: 50, total: 500 })
          : roles.complete(request),
    };
    const events: TraceEvent[] = [];
    const run = await runLocal(boss, 'go', { provider, logger: false, onEvent: (event) => events.push(event) });
    expect(run).toMatchObject({ status: 'completed', output: 'got: Error: sub-agent failed — budget_exceeded' });
    expect(events.find((event) => event.kind === 'StepExecutionFailed')).toMatchObject({ error_code: 'budget_exceeded', message: expect.stringContaining('its budget is 385') });
  });

  it('works out a child budget from the caps left and its own', () => {
    expect(childBudget(undefined, { tokens: 10, tool_calls: 1 }, { max_total_tokens: 50 })).toBeUndefined();
    expect(childBudget({ max_total_tokens: 100 }, { tokens: 30, tool_calls: 1 }, undefined)).toEqual({ max_total_tokens: 70 });
    expect(childBudget({ max_total_tokens: 100, max_tool_calls: 3 }, { tokens: 30, tool_calls: 5 }, { max_total_tokens: 50, on_exceeded: 'final_answer' })).toEqual({
      max_total_tokens: 50,
      max_tool_calls: 0,
      on_exceeded: 'final_answer',
    });
    expect(childBudget({ max_tool_calls: 4 }, { tokens: 0, tool_calls: 1 }, { max_total_tokens: 9 })).toEqual({ max_total_tokens: 9, max_tool_calls: 3 });
  });

  it('refuses a call deeper than max_depth as a tool error', async () => {
    const leaf = new Agent({ name: 'leaf' });
    const middle = new Agent({ name: 'middle', tools: [agentTool(leaf, { max_depth: 1 })] });
    const top = new Agent({ name: 'top', tools: [agentTool(middle)] });
    const run = await runLocal(top, 'go', { provider: byRole(), logger: false });
    expect(run).toMatchObject({ status: 'completed', output: 'got: got: Error: tool temporarily unavailable' });
  });

  it('cancels its children with the run', async () => {
    const slow = new Agent({ name: 'slow', instructions: 'role:slow' });
    const waiting: ModelProvider = {
      id: 'w',
      defaultModel: 'm',
      complete: (request, options) =>
        String(request.messages[0]?.content ?? '').includes('role:slow')
          ? new Promise((_resolve, reject) => {
              if (options?.signal?.aborted) reject(new Error('aborted'));
              options?.signal?.addEventListener('abort', () => reject(new Error('aborted')));
            })
          : Promise.resolve(toolCalls([{ name: 'slow', args: { input: 'x' } }])),
    };
    const controller = new AbortController();
    const events: TraceEvent[] = [];
    const running = runLocal(new Agent({ name: 'impatient', tools: [agentTool(slow)] }), 'go', {
      provider: waiting,
      logger: false,
      signal: controller.signal,
      onEvent: (event) => {
        events.push(event);
        if (event.kind === 'ProviderRequestSent' && event.run_id !== events[0]!.run_id) controller.abort();
      },
    });
    const run = await running;
    expect(run.status).toBe('cancelled');
    expect(events.filter((event) => event.kind === 'RunCancelled')).toHaveLength(2);
    expect(run.events.find((event) => event.kind === 'ToolCallFailed')).toMatchObject({ error_code: 'cancelled' });
  });

  it('leaves tools that are not agent tools as they are', () => {
    expect(childOf(tool({ name: 't', description: 'd', input_schema: { type: 'object' }, handler: () => 'x' }))).toBeUndefined();
  });
});

describe('agent tools of a run in test mode (runLocal)', () => {
  it("run each child in test mode: its agent's script from exec_config.test.agents, or none, and never the real provider", async () => {
    const writer = new Agent({ name: 'writer', instructions: 'role:writer' });
    const lead = new Agent({ name: 'lead', tools: [agentTool(researcher), agentTool(writer)] });
    const provider = byRole();
    const run = await runLocal(lead, 'go', {
      provider,
      logger: false,
      exec_config: childrenInTestMode(
        [
          { tool: 'researcher', input: 'Oslo', id: 'ask' },
          { tool: 'writer', input: 'draft', id: 'write' },
        ],
        { researcher: { output: 'Oslo is mild (scripted)' } },
      ),
    });
    expect(run.status).toBe('completed');
    const ends = Object.fromEntries(
      run.events.flatMap((event) =>
        event.kind === 'ToolCallCompleted' ? [[event.tool_call_id, 'completed']] : event.kind === 'ToolCallFailed' ? [[event.tool_call_id, event.error_code]] : [],
      ),
    );
    expect(ends).toEqual({ ask: 'completed', write: 'child_failed' });
    expect(provider.requests).toEqual([]);
  });
});
