import { Agent, type AgentConfig, type KnownKeys, Workflow, checkExecConfig, checkRunConfig, checkWorkflowConfig, nearestKey, runLocal, tool } from '@arcflow/core';
import { describe, expect, it } from 'vitest';
import { refusal, untyped } from './refusal.ts';

const input_schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
const handler = () => 'ok';
const getWeather = tool({ name: 'get_weather', description: 'Current weather', input_schema, handler });

describe('new Agent', () => {
  it('refuses a misspelt option, naming it and the nearest known one', () => {
    expect(refusal(() => new Agent(untyped({ name: 'u', tool_exection: { max_iterations: 2 } })))).toBe(
      "unknown option 'tool_exection' in agent 'u'; did you mean 'tool_execution'?",
    );
    expect(refusal(() => new Agent(untyped({ name: 'u', instruction: 'Be brief.' })))).toBe("unknown option 'instruction' in agent 'u'; did you mean 'instructions'?");
    expect(refusal(() => new Agent(untyped({ name: 'u', loopDetection: false })))).toBe("unknown option 'loopDetection' in agent 'u'; did you mean 'loop_detection'?");
  });

  it('refuses a misspelt key in each nested option object', () => {
    expect(refusal(() => new Agent(untyped({ name: 'u', tool_execution: { max_iters: 2 } })))).toBe(
      "unknown option 'max_iters' in agent 'u'.tool_execution; did you mean 'max_iterations'?",
    );
    expect(refusal(() => new Agent(untyped({ name: 'u', loop_detection: { treshold: 2 } })))).toBe(
      "unknown option 'treshold' in agent 'u'.loop_detection; did you mean 'threshold'?",
    );
    expect(refusal(() => new Agent(untyped({ name: 'u', budget: { max_calls: 3 } })))).toBe("unknown option 'max_calls' in agent 'u'.budget; did you mean 'max_tool_calls'?");
  });

  it('lists the known options instead when nothing is close', () => {
    expect(refusal(() => new Agent(untyped({ name: 'u', colour: 'red' })))).toBe(
      "unknown option 'colour' in agent 'u' (allowed: name, role, instructions, tools, model, tool_execution, loop_detection, budget, model_settings, provider, model_fallbacks, output_schema, output_retries, max_state_bytes, stream)",
    );
    // A model setting one level too high is pointed to where it goes.
    expect(refusal(() => new Agent(untyped({ name: 'u', temperature: 0.2 })))).toBe("unknown option 'temperature' in agent 'u'; did you mean 'model_settings.temperature'?");
    expect(refusal(() => checkRunConfig({ max_tokens: 9 }))).toBe("config has unknown key 'max_tokens'; did you mean 'model_settings.max_tokens'?");
    expect(refusal(() => new Agent(untyped({ name: 'u', budget: { currency: 'EUR' } })))).not.toContain('did you mean');
  });
});

describe('tool()', () => {
  it('refuses a misspelt option, naming the tool and the nearest known one', () => {
    expect(refusal(() => tool(untyped({ name: 'get_weather', description: '', input_schema, handler, timeout: 5_000 })))).toBe(
      "unknown option 'timeout' in tool 'get_weather'; did you mean 'timeout_ms'?",
    );
    // Before the handler's own check: `handle` is a misspelling, not a missing handler.
    expect(refusal(() => tool(untyped({ name: 'get_weather', description: '', input_schema, handle: handler })))).toBe(
      "unknown option 'handle' in tool 'get_weather'; did you mean 'handler'?",
    );
  });

  it('refuses misspelt approval options', () => {
    expect(refusal(() => tool(untyped({ name: 'refund', description: '', input_schema, handler, needs_aproval: true })))).toBe(
      "unknown option 'needs_aproval' in tool 'refund'; did you mean 'needs_approval'?",
    );
    expect(refusal(() => tool(untyped({ name: 'refund', description: '', input_schema, handler, approval_timeout: 1_000 })))).toBe(
      "unknown option 'approval_timeout' in tool 'refund'; did you mean 'approval_timeout_ms'?",
    );
  });

  it('names no option when nothing is close', () => {
    expect(refusal(() => tool(untyped({ name: 'get_weather', description: '', input_schema, handler, cache: true })))).toBe(
      "unknown option 'cache' in tool 'get_weather' (allowed: name, description, input_schema, timeout_ms, concurrency, retries, max_result_bytes, needs_approval, approval_timeout_ms, output_schema, result_timeout_ms, handler)",
    );
  });
});

describe('new Workflow', () => {
  const agent = new Agent({ name: 'a' });

  it('refuses a misspelt option of the workflow', () => {
    expect(refusal(() => new Workflow(untyped({ name: 'w', steps: [{ id: 's1', agent }], on_step_failur: 'fail_fast' })))).toBe(
      "unknown option 'on_step_failur' in workflow 'w'; did you mean 'on_step_failure'?",
    );
    expect(refusal(() => new Workflow(untyped({ name: 'w', step: [{ id: 's1', agent }] })))).toBe("unknown option 'step' in workflow 'w'; did you mean 'steps'?");
  });

  it('refuses a misspelt option of a step, naming the step', () => {
    const steps = [
      { id: 'first', agent },
      { id: 'report', agent, depend_on: ['first'] },
    ];
    expect(refusal(() => new Workflow(untyped({ name: 'w', steps })))).toBe("unknown option 'depend_on' in step 'report' of workflow 'w'; did you mean 'depends_on'?");
    expect(refusal(() => new Workflow(untyped({ name: 'w', steps: [{ id: 'fx', tool: getWeather, arg: () => ({}) }] })))).toBe(
      "unknown option 'arg' in step 'fx' of workflow 'w'; did you mean 'args'?",
    );
    // A step whose id is misspelt has none: it is named by its place.
    expect(
      refusal(
        () =>
          new Workflow(
            untyped({
              name: 'w',
              steps: [
                { id: 'first', agent },
                { ID: 'second', agent },
              ],
            }),
          ),
      ),
    ).toBe("unknown option 'ID' in steps[1] of workflow 'w'; did you mean 'id'?");
    expect(refusal(() => new Workflow(untyped({ name: 'w', steps: [{ id: 's1', agent, retry: 2 }] })))).toBe(
      "unknown option 'retry' in step 's1' of workflow 'w' (allowed: id, depends_on, agent, input, tool, args)",
    );
  });

  it("keeps naming the other kind's key as such", () => {
    expect(refusal(() => new Workflow(untyped({ name: 'w', steps: [{ id: 's1', agent, args: () => ({}) }] })))).toBe(
      "workflow 'w': step 's1' is an agent step; 'args' belongs to tool steps",
    );
  });
});

describe('run configs', () => {
  it('refuse a misspelt key at each level through checkRunConfig, with the suggestion', () => {
    expect(refusal(() => checkRunConfig({ tool_execution: { max_iters: 3 } }))).toBe("config.tool_execution has unknown key 'max_iters'; did you mean 'max_iterations'?");
    expect(refusal(() => checkRunConfig({ budget: { max_calls: 3 } }))).toBe("config.budget has unknown key 'max_calls'; did you mean 'max_tool_calls'?");
    expect(refusal(() => checkRunConfig({ loop_detection: { windw: 3 } }))).toBe("config.loop_detection has unknown key 'windw'; did you mean 'window'?");
    expect(refusal(() => checkRunConfig({ modle: 'gpt-4o-mini' }))).toBe("config has unknown key 'modle'; did you mean 'model'?");
  });

  it('list the allowed keys when nothing is close', () => {
    expect(refusal(() => checkRunConfig({ colour: 'red' }))).toBe(
      "config has unknown key 'colour' (allowed: tool_execution, loop_detection, model, budget, model_settings, model_fallbacks, output_schema, output_retries)",
    );
    expect(refusal(() => checkRunConfig({ budget: { currency: 'EUR' } }))).toBe(
      "config.budget has unknown key 'currency' (allowed: max_total_tokens, max_tool_calls, max_cost_usd, on_exceeded)",
    );
  });

  it("refuse through an agent's settingsFor and a workflow's config, steps included", () => {
    expect(refusal(() => new Agent({ name: 'u' }).settingsFor({ tool_execution: { on_max_iteration: 'fail' } }))).toBe(
      "config.tool_execution has unknown key 'on_max_iteration'; did you mean 'on_max_iterations'?",
    );
    const workflow = new Workflow({ name: 'w', steps: [{ id: 's1', agent: new Agent({ name: 'a' }) }] });
    expect(refusal(() => checkWorkflowConfig(workflow.graph, { stepz: {} }))).toBe("config has unknown key 'stepz'; did you mean 'steps'?");
    expect(refusal(() => checkWorkflowConfig(workflow.graph, { steps: { s1: { loop_detection: { treshold: 2 } } } }))).toBe(
      "config.steps.s1.loop_detection has unknown key 'treshold'; did you mean 'threshold'?",
    );
  });
});

describe('every documented key', () => {
  it('is still accepted: agent, tool, workflow, steps and run config, each with all of its keys', () => {
    const refund = tool({
      name: 'refund',
      description: 'Refund an order',
      input_schema,
      timeout_ms: 10_000,
      concurrency: 4,
      retries: 2,
      max_result_bytes: 4_096,
      needs_approval: (args: { city: string }) => args.city !== '',
      approval_timeout_ms: 3_600_000,
      handler,
    });
    const agent = new Agent({
      name: 'clerk',
      role: 'Clerk',
      instructions: 'Refund when asked.',
      tools: [refund],
      model: 'gpt-4o-mini',
      tool_execution: { mode: 'llm_select', max_iterations: 5, on_max_iterations: 'final_answer' },
      loop_detection: { window: 3, threshold: 2, action: 'inject' },
      budget: { max_total_tokens: 50_000, max_tool_calls: 20, on_exceeded: 'final_answer' },
    });
    const workflow = new Workflow({
      name: 'refunds',
      steps: [
        { id: 'check', agent, input: ({ input }) => input, depends_on: [] },
        { id: 'pay', tool: refund, args: ({ input }) => ({ city: input }), depends_on: ['check'] },
      ],
      on_step_failure: 'fail_fast',
    });
    const config = {
      tool_execution: { mode: 'legacy_eager', max_iterations: 3, on_max_iterations: 'fail' },
      loop_detection: { window: 4, threshold: 3, action: 'terminate' },
      model: 'gpt-4o',
      budget: { max_total_tokens: 1_000, max_tool_calls: 2, on_exceeded: 'fail' },
    };
    expect(agent.settingsFor(config)).toMatchObject({ mode: 'legacy_eager', max_iterations: 3, model: 'gpt-4o' });
    expect(checkRunConfig(config)).toBe(config);
    expect(checkWorkflowConfig(workflow.graph, { ...config, steps: { check: config } })).toMatchObject({ model: 'gpt-4o' });
    expect(new Agent({ name: 'off', loop_detection: false }).settings.loop_detection).toBe(false);
  });

  it("is accepted in the examples and the README's snippets (the quickstart files)", async () => {
    const agents = await import('../../../examples/quickstart/agents.ts');
    const workflow = await import('../../../examples/quickstart/workflow.ts');
    const demo = await import('../../../examples/weather-agent.ts');
    expect(agents.researcher.name).toBe('researcher');
    expect(workflow.briefing.steps).toHaveLength(3);
    expect(demo.getWeather.name).toBe('get_weather');
  });

  it('is listed by each key table, which the compiler holds to its interface', () => {
    // @ts-expect-error: a table that misses `budget` does not satisfy KnownKeys<AgentConfig>.
    const missing = { name: true, role: true, instructions: true, tools: true, model: true, tool_execution: true, loop_detection: true } as const satisfies KnownKeys<AgentConfig>;
    expect(Object.keys(missing)).not.toContain('budget');
  });
});

describe('nearestKey', () => {
  it('suggests within 2 edits or a third of the longer name, ignoring case, a transposition counting one', () => {
    expect(nearestKey('max_iteratoins', ['mode', 'max_iterations'])).toBe('max_iterations');
    expect(nearestKey('maxIterations', ['mode', 'max_iterations'])).toBe('max_iterations');
    expect(nearestKey('timeout', ['timeout_ms', 'approval_timeout_ms'])).toBe('timeout_ms');
    expect(nearestKey('retry', ['retries'])).toBe('retries');
  });

  it('suggests nothing far off, nor a short name that shares too little', () => {
    expect(nearestKey('temperature', ['name', 'role', 'instructions', 'tools', 'model'])).toBeUndefined();
    expect(nearestKey('ok', ['id', 'args'])).toBeUndefined();
    expect(nearestKey('x', [])).toBeUndefined();
  });
});

describe('a huge unknown key', () => {
  it('comes back cut, not whole', () => {
    const key = 'k'.repeat(100_000);
    const message = refusal(() => checkRunConfig({ [key]: 1 }));
    expect(message.length).toBeLessThan(400);
    expect(message).toContain(`'${'k'.repeat(64)}…'`);
  });
});

describe('exec_config (test mode)', () => {
  it('refuses an unknown or misspelt key at each level, naming its path and the nearest known key', () => {
    expect(refusal(() => checkExecConfig({ tset: {} }))).toBe("exec_config has unknown key 'tset'; did you mean 'test'?");
    expect(refusal(() => checkExecConfig({ test: { stpes: {} } }))).toBe("exec_config.test has unknown key 'stpes'; did you mean 'steps'?");
    expect(refusal(() => checkExecConfig({ test: { steps: { s1: { outptu: 'hi' } } } }))).toBe("exec_config.test.steps.s1 has unknown key 'outptu'; did you mean 'output'?");
  });

  it('says where a script written straight under test belongs', () => {
    expect(refusal(() => checkExecConfig({ test: { output: 'hi' } }))).toBe("exec_config.test has unknown key 'output'; did you mean 'steps.s1.output'?");
    expect(refusal(() => checkExecConfig({ test: 'hi' }))).toBe('exec_config.test must be an object');
  });

  it('refuses a script for a step the agent or workflow does not have, naming it and the steps there are', async () => {
    const agent = new Agent({ name: 'scripted', tools: [getWeather] });
    await expect(runLocal(agent, 'hi', { exec_config: { test: { steps: { s2: { output: 'never' } } } } })).rejects.toThrow(
      "exec_config.test.steps.s2: agent 'scripted' has no step 's2'; did you mean 's1'? (steps: s1)",
    );
    const workflow = new Workflow({ name: 'flow', steps: [{ id: 'draft', agent }] });
    await expect(runLocal(workflow, 'hi', { exec_config: { test: { steps: { drafts: { output: 'never' } } } } })).rejects.toThrow(
      "exec_config.test.steps.drafts: workflow 'flow' has no step 'drafts'; did you mean 'draft'? (steps: draft)",
    );
  });
});
