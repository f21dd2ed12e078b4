import { Agent, Workflow, checkModelSettings, checkRunConfig, checkWorkflowConfig, mergeModelSettings, runLocal, settingsForCall, tool } from '@arcflow/core';
import { failure, reply, scriptedProvider, toolCall } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { refusal, untyped } from './refusal.ts';

const lookup = tool({
  name: 'lookup',
  description: 'Looks a word up',
  input_schema: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },
  handler: ({ word }: { word: string }) => `${word}: found`,
});
const fast = { attempts: 2, backoff_ms: 1, max_backoff_ms: 2 };

describe('model_settings, checked where given', () => {
  it('refuses each bad value naming the key and what it expects', () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ temperature: 3 }, 'temperature: expected a number from 0 to 2'],
      [{ temperature: '0.5' }, 'temperature: expected a number from 0 to 2'],
      [{ top_p: -0.1 }, 'top_p: expected a number from 0 to 1'],
      [{ max_tokens: 0 }, 'max_tokens: expected an integer >= 1'],
      [{ max_tokens: 1.5 }, 'max_tokens: expected an integer >= 1'],
      [{ stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop: expected a non-empty string or a list of 1 to 4 of them'],
      [{ seed: 'x' }, 'seed: expected an integer'],
      [{ frequency_penalty: 2.5 }, 'frequency_penalty: expected a number from -2 to 2'],
      [{ presence_penalty: -3 }, 'presence_penalty: expected a number from -2 to 2'],
      [{ parallel_tool_calls: 'yes' }, 'parallel_tool_calls: expected true or false'],
      [{ tool_choice: 'always' }, "tool_choice: expected 'auto', 'required', 'none' or { name: '<one of the agent's tools>' }"],
      [{ reasoning_effort: 'max' }, "reasoning_effort: expected one of 'minimal', 'low', 'medium', 'high'"],
      [{ extra_body: { model: 'other' } }, "extra_body: may not set 'model' (arcflow sets it)"],
      [{ extra_body: { stream: true } }, "extra_body: may not set 'stream' (arcflow sets it)"],
      [{ extra_body: { blob: 'x'.repeat(17_000) } }, 'extra_body: is 17011 bytes as JSON; the limit is 16384'],
    ];
    for (const [settings, problem] of cases) {
      expect(refusal(() => checkRunConfig({ model_settings: settings }))).toBe(`config.model_settings.${problem}`);
      expect(refusal(() => new Agent(untyped({ name: 'a', model_settings: settings })))).toBe(`agent 'a': model_settings.${problem}`);
    }
  });

  it('refuses an unknown key with the nearest known one, and a tool_choice naming a tool the agent lacks', () => {
    expect(refusal(() => checkRunConfig({ model_settings: { temprature: 0 } }))).toBe("config.model_settings has unknown key 'temprature'; did you mean 'temperature'?");
    expect(refusal(() => new Agent(untyped({ name: 'a', model_settings: { maxTokens: 5 } })))).toBe(
      "unknown option 'maxTokens' in agent 'a'.model_settings; did you mean 'max_tokens'?",
    );
    expect(refusal(() => new Agent({ name: 'a', tools: [lookup], model_settings: { tool_choice: { name: 'search' } } }))).toBe(
      "agent 'a': model_settings.tool_choice: names 'search', which is not one of the agent's tools (lookup)",
    );
    const agent = new Agent({ name: 'a', tools: [lookup] });
    expect(refusal(() => agent.settingsFor({ model_settings: { tool_choice: { name: 'search' } } }))).toBe(
      "config.model_settings.tool_choice: names 'search', which is not one of the agent's tools (lookup)",
    );
    expect(agent.settingsFor({ model_settings: { tool_choice: { name: 'lookup' } } }).model_settings).toEqual({ tool_choice: { name: 'lookup' } });
  });

  it("refuses a workflow run's tool_choice naming a tool that an agent step it applies to lacks, from the registered graph", () => {
    const workflow = new Workflow({
      name: 'w',
      steps: [
        { id: 'look', agent: new Agent({ name: 'looker', tools: [lookup] }) },
        { id: 'write', agent: new Agent({ name: 'writer' }), depends_on: ['look'] },
      ],
    });
    expect(workflow.graph.steps.map((step) => step.tools)).toEqual([['lookup'], []]);
    expect(refusal(() => checkWorkflowConfig(workflow.graph, { steps: { write: { model_settings: { tool_choice: { name: 'lookup' } } } } }))).toBe(
      "config.steps.write.model_settings.tool_choice: names 'lookup', which is not one of the agent's tools (it has none)",
    );
    expect(refusal(() => checkWorkflowConfig(workflow.graph, { model_settings: { tool_choice: { name: 'lookup' } } }))).toBe(
      "config.model_settings (for step 'write').tool_choice: names 'lookup', which is not one of the agent's tools (it has none)",
    );
    // A step's own tool_choice replaces the shared one for that step.
    const config = { model_settings: { tool_choice: { name: 'lookup' } }, steps: { write: { model_settings: { tool_choice: 'auto' } } } } as const;
    expect(checkWorkflowConfig(workflow.graph, config)).toEqual(config);
    // A graph registered before steps listed their tools is not checked.
    const older = { ...workflow.graph, steps: workflow.graph.steps.map(({ tools: _tools, ...step }) => step) };
    expect(checkWorkflowConfig(older, { model_settings: { tool_choice: { name: 'lookup' } } })).toEqual({ model_settings: { tool_choice: { name: 'lookup' } } });
  });

  it("merges a run's settings over the agent's key by key, and makes them part of the definition hash", () => {
    expect(mergeModelSettings({ temperature: 0.2, seed: 7 }, { temperature: 0.9, max_tokens: 50 })).toEqual({ temperature: 0.9, seed: 7, max_tokens: 50 });
    const agent = new Agent({ name: 'a', model_settings: { temperature: 0.2, seed: 7 } });
    expect(agent.settingsFor({ model_settings: { temperature: 1 } }).model_settings).toEqual({ temperature: 1, seed: 7 });
    expect(new Agent({ name: 'a', model_settings: { temperature: 0.3 } }).definition_hash).not.toBe(agent.definition_hash);
    expect(new Agent({ name: 'a', provider: 'fast' }).definition_hash).not.toBe(new Agent({ name: 'a' }).definition_hash);
    expect(checkModelSettings({ temperature: 0 }, 'config', 'config')).toEqual({ temperature: 0 });
  });

  it('sends tool_choice on a step’s first call only, and neither it nor parallel_tool_calls without tools', () => {
    const settings = { temperature: 0, tool_choice: 'required' as const, parallel_tool_calls: false };
    expect(settingsForCall(settings, { first: true, hasTools: true })).toEqual(settings);
    expect(settingsForCall(settings, { first: false, hasTools: true })).toEqual({ temperature: 0, tool_choice: 'auto', parallel_tool_calls: false });
    expect(settingsForCall(settings, { first: true, hasTools: false })).toEqual({ temperature: 0 });
  });
});

describe('model settings and fallbacks in runLocal', () => {
  it('sends the settings with each request: tool_choice required first, auto after it, and none on the final-answer call', async () => {
    const agent = new Agent({
      name: 'forced',
      tools: [lookup],
      model_settings: { temperature: 0.1, tool_choice: 'required', max_tokens: 64 },
      tool_execution: { max_iterations: 2, on_max_iterations: 'final_answer' },
    });
    const provider = scriptedProvider([toolCall('lookup', { word: 'a' }), toolCall('lookup', { word: 'b' }), reply('Done.')]);
    const run = await runLocal(agent, 'go', { provider, config: { model_settings: { temperature: 0.5 } }, logger: false });
    expect(run.status).toBe('completed');
    expect(provider.requests.map((request) => request.settings)).toEqual([
      { temperature: 0.5, max_tokens: 64, tool_choice: 'required' },
      { temperature: 0.5, max_tokens: 64, tool_choice: 'auto' },
      { temperature: 0.5, max_tokens: 64 },
    ]);
    expect(provider.requests[2]!.tools).toEqual([]);
    // Events hold no setting.
    expect(JSON.stringify(run.events)).not.toContain('temperature');
  });

  it('passes a call that failed for good with a retryable failure on to the fallbacks, in order, each try recorded under its provider and model', async () => {
    const primary = scriptedProvider([failure('server_error', { status: 503, retryable: true })], { id: 'primary', repeat: true });
    const second = scriptedProvider([failure('timeout', { retryable: true })], { id: 'second', repeat: true });
    const third = scriptedProvider([reply('From the third.')], { id: 'third' });
    const agent = new Agent({
      name: 'resilient',
      model: 'big',
      model_fallbacks: [
        { model: 'medium', provider: 'second' },
        { model: 'small', provider: 'third' },
      ],
    });
    const run = await runLocal(agent, 'go', { provider: primary, providers: { second, third }, provider_retry: fast, logger: false });
    expect(run.output).toBe('From the third.');
    expect([primary, second, third].map((provider) => provider.requests.map((request) => request.model))).toEqual([['big', 'big'], ['medium', 'medium'], ['small']]);
    const tries = run.events
      .filter((event) => event.kind === 'ProviderRequestSent' || event.kind === 'ProviderError')
      .map((event) => `${event.kind} ${event.provider_id} ${event.model_id}`);
    expect(tries).toEqual([
      'ProviderRequestSent primary big',
      'ProviderError primary big',
      'ProviderRequestSent primary big',
      'ProviderError primary big',
      'ProviderRequestSent second medium',
      'ProviderError second medium',
      'ProviderRequestSent second medium',
      'ProviderError second medium',
      'ProviderRequestSent third small',
    ]);
  });

  it('does not pass a non-retryable failure on, and fails when the last fallback has failed', async () => {
    const refused = scriptedProvider([failure('authentication', { status: 401, retryable: false })], { id: 'primary' });
    const spare = scriptedProvider([reply('never')], { id: 'spare' });
    const agent = new Agent({ name: 'strict', model_fallbacks: [{ model: 'm2', provider: 'spare' }] });
    const run = await runLocal(agent, 'go', { provider: refused, providers: { spare }, provider_retry: fast, logger: false });
    expect(run.status).toBe('failed');
    expect(spare.requests).toHaveLength(0);
    const down = scriptedProvider([failure('server_error', { status: 500, retryable: true })], { id: 'down', repeat: true });
    const alsoDown = scriptedProvider([failure('server_error', { status: 502, retryable: true })], { id: 'spare', repeat: true });
    const failed = await runLocal(agent, 'go', { provider: down, providers: { spare: alsoDown }, provider_retry: fast, logger: false });
    expect(failed.error).toMatchObject({ code: 'ProviderError', error_code: 'provider_error' });
    expect(alsoDown.requests).toHaveLength(2);
  });

  it("sends a named provider's own model when the agent names none, before the worker's default", async () => {
    const local = scriptedProvider([reply('local answer')], { id: 'local', model: 'qwen-local' });
    const run = await runLocal(new Agent({ name: 'triage', provider: 'local' }), 'go', { providers: { local }, default_model: 'gpt-default', logger: false });
    expect(run.output).toBe('local answer');
    expect(local.requests[0]!.model).toBe('qwen-local');
  });

  it("blames a fallback the run's own config names on the run's config, not on the agent", async () => {
    const agent = new Agent({ name: 'writer' });
    const primary = scriptedProvider([failure('server_error', { status: 503, retryable: true })], { repeat: true });
    await expect(
      runLocal(agent, 'go', {
        provider: primary,
        providers: { local: scriptedProvider([reply('x')]) },
        config: { model_fallbacks: [{ model: 'm', provider: 'fast' }] },
        provider_retry: fast,
        logger: false,
      }),
    ).rejects.toThrow("the run's config.model_fallbacks[0] (agent 'writer') uses provider 'fast', which this worker does not hold (it holds: local)");
  });

  it('refuses an agent whose provider is not held, naming both', async () => {
    const agent = new Agent({ name: 'writer', provider: 'fast' });
    await expect(runLocal(agent, 'go', { provider: scriptedProvider([reply('x')]), providers: { local: scriptedProvider([reply('x')]) }, logger: false })).rejects.toThrow(
      "agent 'writer' uses provider 'fast', which this worker does not hold (it holds: local)",
    );
  });
});
