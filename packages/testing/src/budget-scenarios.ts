import { Agent, type LocalRun, type TraceEvent, Workflow, tool } from '@arcflow/core';
import { describe, expect, it } from 'vitest';
import { assertEventInvariants } from './invariants.ts';
import type { ScenarioRunner } from './scenarios.ts';
import { type ScriptedProvider, type ScriptedTurn, reply, scriptedProvider as localScriptedProvider, toolCalls } from './scripted-provider.ts';

const ofKind = <K extends TraceEvent['kind']>(run: LocalRun, kind: K) => run.events.filter((event): event is Extract<TraceEvent, { kind: K }> => event.kind === kind);

/** Budgets (SPEC §10): caps counted over the whole run, enforced before the calls that would cross them run. */
export function defineBudgetScenarios(name: string, runner: ScenarioRunner, scriptedProvider: (turns: readonly ScriptedTurn[]) => ScriptedProvider = localScriptedProvider): void {
  const run = async (...args: Parameters<ScenarioRunner>) => {
    const result = await runner(...args);
    assertEventInvariants(result.events);
    return result;
  };
  const counted = () => {
    let executions = 0;
    const probe = tool({
      name: 'budget_probe',
      description: 'counts',
      input_schema: { type: 'object', properties: { n: { type: 'integer' } } },
      handler: async ({ n }: { n?: number }) => {
        executions += 1;
        return `probed ${n ?? 0}`;
      },
    });
    return { probe, executions: () => executions };
  };

  describe(`${name}: budgets`, () => {
    it('fails with budget_exceeded, without executing the calls of the response that crossed max_total_tokens', async () => {
      const { probe, executions } = counted();
      const model = scriptedProvider([toolCalls([{ name: 'budget_probe', args: { n: 1 } }]), toolCalls([{ name: 'budget_probe', args: { n: 2 } }]), reply('never')]);
      const agent = new Agent({ name: 'token_capped', tools: [probe], budget: { max_total_tokens: 25 } });
      const result = await run(agent, 'go', { provider: model });
      expect(result.status).toBe('failed');
      expect(result.error).toMatchObject({ code: 'StepExecutionFailed', error_code: 'budget_exceeded', message: expect.stringContaining('30 tokens; its budget is 25') });
      expect(executions()).toBe(1);
      expect(ofKind(result, 'ToolCallStarted')).toHaveLength(1);
      expect(ofKind(result, 'StepExecutionFailed')).toEqual([expect.objectContaining({ error_code: 'budget_exceeded' })]);
      expect(result.events.at(-1)).toMatchObject({ kind: 'RunFailed', error_code: 'budget_exceeded' });
      expect(result.usage.total).toBe(30);
    });

    it('answers once more without tools under on_exceeded: final_answer when max_tool_calls would be crossed; the run config overrides the agent field by field', async () => {
      const { probe, executions } = counted();
      const model = scriptedProvider([
        toolCalls([
          { name: 'budget_probe', args: { n: 1 }, id: 'a1' },
          { name: 'budget_probe', args: { n: 2 }, id: 'a2' },
        ]),
        toolCalls([{ name: 'budget_probe', args: { n: 3 }, id: 'a3' }]),
        reply('summary from two calls'),
      ]);
      const agent = new Agent({ name: 'call_capped', tools: [probe], budget: { max_tool_calls: 2, on_exceeded: 'fail' } });
      const result = await run(agent, 'go', { provider: model, config: { budget: { on_exceeded: 'final_answer' } } });
      expect(result.status).toBe('completed');
      expect(result.output).toBe('summary from two calls');
      expect(executions()).toBe(2);
      expect(model.requests[2]?.tools).toEqual([]);
    });

    it('takes the text of a final-answer call that asks for tools anyway, and fails budget_exceeded when it has none', async () => {
      const { probe, executions } = counted();
      const agent = new Agent({ name: 'stubborn', tools: [probe], budget: { max_tool_calls: 0, on_exceeded: 'final_answer' } });
      const asks = toolCalls([{ name: 'budget_probe', args: { n: 1 } }]);
      const withText = { ...toolCalls([{ name: 'budget_probe', args: { n: 2 } }]), content: 'partial answer text' };
      const kept = await run(agent, 'go', { provider: scriptedProvider([asks, withText]) });
      expect(kept).toMatchObject({ status: 'completed', output: 'partial answer text' });
      const bare = await run(agent, 'go', { provider: scriptedProvider([asks, toolCalls([{ name: 'budget_probe', args: { n: 3 } }])]) });
      expect(bare.status).toBe('failed');
      expect(bare.error).toMatchObject({ error_code: 'budget_exceeded', message: expect.stringContaining('its budget was spent') });
      expect(executions()).toBe(0);
    });

    it('keeps a text answer that goes over the budget', async () => {
      const agent = new Agent({ name: 'text_over', budget: { max_total_tokens: 5 } });
      const result = await run(agent, 'go', { provider: scriptedProvider([reply('worth it')]) });
      expect(result).toMatchObject({ status: 'completed', output: 'worth it' });
    });

    it("shares one budget between a workflow's steps", async () => {
      const { probe, executions } = counted();
      const agent = new Agent({ name: 'budget_step', tools: [probe] });
      const workflow = new Workflow({
        name: 'budgeted_flow',
        steps: [
          { id: 'first', agent },
          { id: 'second', agent, depends_on: ['first'] },
        ],
      });
      const turns = { responses: [{ tool_calls: [{ name: 'budget_probe', arguments: { n: 1 } }] }, { output: 'step done' }] };
      const result = await run(workflow, 'go', { config: { budget: { max_tool_calls: 1 } }, exec_config: { test: { steps: { first: turns, second: turns } } } });
      expect(executions()).toBe(1);
      expect(result.status).toBe('failed');
      expect(result.steps).toMatchObject({ first: { status: 'completed' }, second: { status: 'failed', error: { error_code: 'budget_exceeded' } } });
      expect(result.error).toMatchObject({ error_code: 'step_failed' });
    });

    it('refuses a budget that is not one', async () => {
      const agent = new Agent({ name: 'bad_budget' });
      await expect(runner(agent, 'go', { provider: scriptedProvider([reply('x')]), config: { budget: { max_tool_calls: -1 } } })).rejects.toThrow(
        'config.budget.max_tool_calls must be an integer >= 0, got -1',
      );
      await expect(runner(agent, 'go', { provider: scriptedProvider([reply('x')]), config: { budget: { max_calls: 3 } } })).rejects.toThrow(
        "config.budget has unknown key 'max_calls'",
      );
      expect(() => new Agent({ name: 'bad_budget_agent', budget: { on_exceeded: 'shrug' as never } })).toThrow(
        "agent 'bad_budget_agent'.budget.on_exceeded must be 'fail' or 'final_answer'",
      );
    });
  });
}
