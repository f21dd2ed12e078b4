import { Agent, ConfigError, Workflow, runLocal, tool } from '@arcflow/core';
import { reply, scriptedProvider, toolCalls } from '@arcflow/testing';
import { type WaitingScenarioRunner, defineToolResultScenarios } from '@arcflow/testing/scenarios';
import { describe, expect, it } from 'vitest';

const local: WaitingScenarioRunner = (agent, input, { provider, toolResult, approve, cancelWhenWaiting }) => {
  const controller = new AbortController();
  const answer = cancelWhenWaiting
    ? () => {
        controller.abort();
        return new Promise<never>(() => {});
      }
    : toolResult;
  return runLocal(agent, input, { provider, logger: false, signal: controller.signal, ...(answer ? { toolResult: answer } : {}), ...(approve ? { approve } : {}) });
};

defineToolResultScenarios('runLocal', local);

const browserTool = (extra: Record<string, unknown> = {}) => tool({ name: 'get_location', description: 'From the browser', input_schema: { type: 'object' }, ...extra });

describe('external tools and ctx.defer, in definitions and runLocal', () => {
  it('takes a tool without a handler as external, with a 24 h result timeout by default, and checks result_timeout_ms and output_schema at definition', () => {
    const external = browserTool();
    expect(external.external).toBe(true);
    expect(external.result_timeout_ms).toBe(24 * 3600 * 1000);
    expect(browserTool({ result_timeout_ms: 30 * 24 * 3600 * 1000 }).result_timeout_ms).toBe(30 * 24 * 3600 * 1000);
    expect(() => browserTool({ result_timeout_ms: 30 * 24 * 3600 * 1000 + 1 })).toThrow(/get_location.*result_timeout_ms must be an integer from 1 to 2592000000/);
    expect(() => browserTool({ result_timeout_ms: 0 })).toThrow(ConfigError);
    expect(() => browserTool({ output_schema: { type: 'nonsense' } })).toThrow(/tool 'get_location': output_schema/);
    expect(() => browserTool({ handler: 'not a function' })).toThrow(/handler must be a function/);
  });

  it('fails an external call `result_timeout` at once when runLocal has no toolResult', async () => {
    const provider = scriptedProvider([toolCalls([{ name: 'get_location', args: {}, id: 'call_loc' }]), reply('No idea.')]);
    const started = Date.now();
    const run = await runLocal(new Agent({ name: 'browser-agent', tools: [browserTool()] }), 'Where am I?', { provider, logger: false });
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(run.events.filter((event) => event.kind === 'ToolCallFailed').map((event) => (event as { error_code: string }).error_code)).toEqual(['result_timeout']);
    expect(provider.requests[1]!.messages.at(-1)).toMatchObject({ role: 'tool', content: 'Error: no result came in time' });
  });

  it('refuses a toolResult answer that is neither { output } nor { error }, and an error over 4 KiB', async () => {
    for (const bad of [{}, { output: 1, error: 'x' }, { error: 'x'.repeat(4097) }]) {
      const provider = scriptedProvider([toolCalls([{ name: 'get_location', args: {} }]), reply('x')]);
      await expect(runLocal(new Agent({ name: 'browser-agent', tools: [browserTool()] }), 'Where?', { provider, logger: false, toolResult: () => bad as never })).rejects.toThrow(
        /toolResult answered .* with a bad result/,
      );
    }
  });

  it('fails a call answered with an empty error: the model reads `Error: `', async () => {
    const provider = scriptedProvider([toolCalls([{ name: 'get_location', args: {} }]), reply('x')]);
    const run = await runLocal(new Agent({ name: 'browser-agent', tools: [browserTool()] }), 'Where?', { provider, logger: false, toolResult: () => ({ error: '' }) });
    expect(run.events.filter((event) => event.kind === 'ToolCallFailed').map((event) => (event as { error_code: string }).error_code)).toEqual(['tool_error']);
    expect(provider.requests[1]!.messages.at(-1)).toMatchObject({ role: 'tool', content: 'Error: ' });
  });

  it('fails a call whose handler defers with a bad timeout_ms as a tool error', async () => {
    const deferring = tool({ name: 'later', description: 'x', input_schema: { type: 'object' }, handler: (_args, ctx) => ctx.defer({ timeout_ms: -1 }) });
    const provider = scriptedProvider([toolCalls([{ name: 'later', args: {} }]), reply('x')]);
    const run = await runLocal(new Agent({ name: 'deferrer', tools: [deferring] }), 'go', { provider, logger: false, toolResult: () => ({ output: 'x' }) });
    expect(run.events.filter((event) => event.kind === 'ToolCallFailed').map((event) => (event as { error_code: string }).error_code)).toEqual(['tool_error']);
  });

  it('refuses an external tool as a workflow tool step, and fails a tool step whose handler defers (tool_error)', async () => {
    expect(() => new Workflow({ name: 'flow_ext', steps: [{ id: 'where', tool: browserTool() }] })).toThrow(/step 'where': tool 'get_location' has no handler/);
    const deferring = tool({ name: 'later', description: 'x', input_schema: { type: 'object' }, handler: (_args, ctx) => ctx.defer() });
    const flow = new Workflow({ name: 'flow_defer', steps: [{ id: 'pay', tool: deferring, args: () => ({}) }] });
    const run = await runLocal(flow, 'go', { logger: false, toolResult: () => ({ output: 'never asked' }) });
    expect(run.events.filter((event) => event.kind === 'ToolCallFailed').map((event) => (event as { error_code: string }).error_code)).toEqual(['tool_error']);
    expect(run.events.some((event) => event.kind === 'ToolResultRequested')).toBe(false);
  });
});
