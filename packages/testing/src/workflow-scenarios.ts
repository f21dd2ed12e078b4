import { Agent, type LocalRun, type TraceEvent, Workflow, tool } from '@arcflow/core';
import { describe, expect, it } from 'vitest';
import { capturingLogger } from './capturing-logger.ts';
import { assertWorkflowInvariants } from './invariants.ts';
import type { ScenarioRunner } from './scenarios.ts';
import { type ScriptedProvider, type ScriptedTurn, reply, scriptedProvider as localScriptedProvider } from './scripted-provider.ts';

const ofKind = <K extends TraceEvent['kind']>(run: LocalRun, kind: K) => run.events.filter((event): event is Extract<TraceEvent, { kind: K }> => event.kind === kind);
const stepKinds = (run: LocalRun, step_id: string) => run.events.filter((event) => event.step_id === step_id).map((event) => event.kind);
const userInput = (request: { messages: readonly { role: string; content?: unknown }[] } | undefined) => request?.messages.find((message) => message.role === 'user')?.content;

/** Resolves once `parties` callers have arrived; fails a caller that waits longer than `timeoutMs`. */
function barrier(parties: number, timeoutMs = 5_000) {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return async () => {
    arrived += 1;
    if (arrived >= parties) open();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('barrier: the other party never arrived')), timeoutMs)));
    try {
      await Promise.race([opened, timeout]);
    } finally {
      clearTimeout(timer);
    }
  };
}

const amountSchema = { type: 'object', properties: { amount: { type: 'number' }, currency: { type: 'string' } }, required: ['amount', 'currency'] };

/**
 * The workflow scenarios of SPEC §7, written once and run against every runner: scheduling,
 * inputs and outputs, tool steps, partial failure under both policies, test mode and per-step
 * config, refused requests, and a wide graph. Each checks the log's invariants.
 */
export function defineWorkflowScenarios(
  name: string,
  runner: ScenarioRunner,
  scriptedProvider: (turns: readonly ScriptedTurn[]) => ScriptedProvider = localScriptedProvider,
): void {
  const run = async (...args: Parameters<ScenarioRunner>) => {
    const result = await runner(...args);
    assertWorkflowInvariants(result.events);
    return result;
  };

  describe(`${name}: workflows`, () => {
    it('runs a diamond: the middle steps overlap, the last sees both outputs, the record adds up', async () => {
      const meet = barrier(2);
      const probe = tool({
        name: 'probe',
        description: 'waits for its sibling',
        input_schema: { type: 'object', properties: { from: { type: 'string' } }, required: ['from'] },
        handler: async ({ from }: { from: string }) => {
          await meet();
          return `${from} met`;
        },
      });
      const workflow = new Workflow({
        name: 'diamond',
        steps: [
          { id: 'a', agent: new Agent({ name: 'planner' }) },
          { id: 'b', tool: probe, depends_on: ['a'], args: ({ outputs }) => ({ from: `b after ${outputs.a}` }) },
          { id: 'c', tool: probe, depends_on: ['a'], args: () => ({ from: 'c' }) },
          { id: 'd', agent: new Agent({ name: 'writer' }), depends_on: ['b', 'c'] },
        ],
      });
      const model = scriptedProvider([reply('plan'), reply('final')]);
      const result = await run(workflow, 'topic', { provider: model });
      expect(result.status).toBe('completed');
      expect(result.output).toBe('final');
      expect(result.iterations).toBe(2);
      expect(result.usage).toEqual({ input: 20, output: 10, total: 30 });
      expect(result.steps).toEqual({
        a: { status: 'completed', output: 'plan' },
        b: { status: 'completed', output: 'b after plan met' },
        c: { status: 'completed', output: 'c met' },
        d: { status: 'completed', output: 'final' },
      });
      expect(userInput(model.requests[1])).toBe('topic\n\n[b]\nb after plan met\n\n[c]\nc met');
      expect(result.events[0]).toMatchObject({ kind: 'RunEnqueued', step_id: 'run', workflow: 'diamond', steps_count: 4 });
      expect(result.events[0]).not.toHaveProperty('agent');
      expect(result.events.at(-1)).toMatchObject({ kind: 'RunCompleted', step_id: 'run', usage: { input: 20, output: 10, total: 30 } });
      expect(ofKind(result, 'StepStarted').map((event) => [event.step_id, event.step_type, event.depends_on])).toEqual(
        expect.arrayContaining([
          ['a', 'agent', []],
          ['b', 'tool', ['a']],
          ['c', 'tool', ['a']],
          ['d', 'agent', ['b', 'c']],
        ]),
      );
      expect(ofKind(result, 'StepCompleted').find((event) => event.step_id === 'b')).toMatchObject({ output_size_bytes: 16, duration_ms: expect.any(Number) });
      expect(stepKinds(result, 'b')).toEqual(['StepStarted', 'ToolCallStarted', 'ToolCallCompleted', 'StepCompleted']);
      expect(ofKind(result, 'ToolCallStarted').find((event) => event.step_id === 'b')).toMatchObject({ iteration: 1, tool_call_id: 'b', tool_name: 'probe', attempt: 1 });
      expect(stepKinds(result, 'a')).toEqual([
        'StepStarted',
        'AgentInvoked',
        'ProviderRequestSent',
        'ProviderResponseReceived',
        'TokensConsumed',
        'AgentResponseReceived',
        'StepCompleted',
      ]);
    });

    it('feeds a tool step from an agent step; arguments that fail the schema fail that step and skip its dependents', async () => {
      let conversions = 0;
      const convert = tool({
        name: 'convert',
        description: 'converts an amount',
        input_schema: amountSchema,
        handler: async ({ amount, currency }: { amount: number; currency: string }) => {
          conversions += 1;
          return { nok: amount * 11, from: currency };
        },
      });
      const workflow = new Workflow({
        name: 'fx_report',
        steps: [
          { id: 'extract', agent: new Agent({ name: 'extractor' }) },
          { id: 'convert', tool: convert, depends_on: ['extract'], args: ({ outputs }) => JSON.parse(outputs.extract ?? '') },
          { id: 'report', agent: new Agent({ name: 'reporter' }), depends_on: ['convert'] },
        ],
      });
      const good = await run(workflow, 'EUR 100', { provider: scriptedProvider([reply('{"amount": 100, "currency": "EUR"}'), reply('about 1100 NOK')]) });
      expect(good.status).toBe('completed');
      expect(good.steps?.convert).toEqual({ status: 'completed', output: '{"nok":1100,"from":"EUR"}' });
      expect(good.output).toBe('about 1100 NOK');

      const bad = await run(workflow, 'EUR lots', { provider: scriptedProvider([reply('{"amount": "lots", "currency": "EUR"}')]) });
      expect(conversions).toBe(1);
      expect(bad.status).toBe('failed');
      expect(bad.error).toMatchObject({ code: 'StepExecutionFailed', error_code: 'step_failed', message: expect.stringContaining("step 'convert'") });
      expect(bad.steps?.convert).toMatchObject({ status: 'failed', error: { error_code: 'invalid_arguments' } });
      expect(bad.steps?.report).toEqual({ status: 'skipped' });
      expect(bad.output).toBeUndefined();
      expect(stepKinds(bad, 'convert')).toEqual(['StepStarted', 'ToolCallStarted', 'ToolInputValidationFailed', 'StepExecutionFailed']);
      expect(ofKind(bad, 'ToolInputValidationFailed')[0]).toMatchObject({ tool_call_id: 'convert', violation_description: 'amount: expected number' });
      expect(ofKind(bad, 'StepExecutionFailed')[0]).toMatchObject({ step_id: 'convert', error_code: 'invalid_arguments' });
      expect(ofKind(bad, 'StepSkipped')).toEqual([expect.objectContaining({ step_id: 'report', reason: 'dependency_failed', failed_dependency: 'convert' })]);
      expect(bad.events.at(-1)).toMatchObject({ kind: 'RunFailed', step_id: 'run', error_code: 'step_failed' });
    });

    it('under continue, a failed branch skips its dependents while the independent branch completes', async () => {
      const broken = tool({
        name: 'broken',
        description: 'always fails',
        input_schema: { type: 'object' },
        handler: async () => {
          throw new Error('disk on fire');
        },
      });
      const fine = tool({ name: 'fine', description: 'works', input_schema: { type: 'object' }, handler: async () => 'fine result' });
      const agent = new Agent({ name: 'follower' });
      const workflow = new Workflow({
        name: 'branches',
        steps: [
          { id: 'x', tool: broken, args: () => ({}) },
          { id: 'y', agent, depends_on: ['x'] },
          { id: 'z', agent, depends_on: ['y'] },
          { id: 'w', tool: fine, args: () => ({}) },
        ],
      });
      const logger = capturingLogger();
      const { lines } = logger;
      const result = await run(workflow, 'go', { logger });
      expect(result.status).toBe('failed');
      expect(result.error).toMatchObject({ error_code: 'step_failed', message: expect.stringContaining("step 'x' failed (tool_error)") });
      expect(result.steps).toEqual({
        x: { status: 'failed', error: expect.objectContaining({ error_code: 'tool_error' }) },
        y: { status: 'skipped' },
        z: { status: 'skipped' },
        w: { status: 'completed', output: 'fine result' },
      });
      expect(result.output).toBe(JSON.stringify({ w: 'fine result' }));
      expect(ofKind(result, 'StepSkipped').map((event) => [event.step_id, event.reason, event.failed_dependency])).toEqual([
        ['y', 'dependency_failed', 'x'],
        ['z', 'dependency_failed', 'y'],
      ]);
      expect(ofKind(result, 'StepExecutionFailed')).toEqual([expect.objectContaining({ step_id: 'x', error_code: 'tool_error' })]);
      expect(JSON.stringify(result.events)).not.toContain('disk on fire');
      expect(lines.join('\n')).toContain('disk on fire');
    });

    it('under fail_fast, the first failure cancels the running sibling and skips the rest', async () => {
      let slowStarted!: () => void;
      const slowRunning = new Promise<void>((resolve) => (slowStarted = resolve));
      let slowAborted = false;
      const slow = tool({
        name: 'slow_step',
        description: 'runs until cancelled',
        input_schema: { type: 'object' },
        timeout_ms: 20_000,
        handler: async (_args: unknown, ctx) => {
          slowStarted();
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, 15_000);
            ctx.signal.addEventListener('abort', () => {
              slowAborted = true;
              clearTimeout(timer);
              resolve();
            });
          });
          return 'slow finished';
        },
      });
      const failing = tool({
        name: 'fails_soon',
        description: 'fails once the slow step runs',
        input_schema: { type: 'object' },
        handler: async () => {
          await slowRunning;
          throw new Error('no');
        },
      });
      const workflow = new Workflow({
        name: 'fast_fail',
        on_step_failure: 'fail_fast',
        steps: [
          { id: 'slow', tool: slow, args: () => ({}) },
          { id: 'bad', tool: failing, args: () => ({}) },
          { id: 'after', agent: new Agent({ name: 'never_runs' }), depends_on: ['slow'] },
        ],
      });
      const started = Date.now();
      const result = await run(workflow, 'go', { logger: capturingLogger() });
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(result.status).toBe('failed');
      expect(result.error).toMatchObject({ error_code: 'step_failed', message: expect.stringContaining("step 'bad'") });
      expect(result.steps).toMatchObject({ slow: { status: 'cancelled' }, bad: { status: 'failed' }, after: { status: 'skipped' } });
      expect(ofKind(result, 'StepSkipped')).toEqual([expect.objectContaining({ step_id: 'after', reason: 'run_failed' })]);
      expect(ofKind(result, 'ToolCallFailed').find((event) => event.step_id === 'slow')).toMatchObject({ error_code: 'cancelled' });
      const deadline = Date.now() + 5_000;
      while (!slowAborted && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(slowAborted).toBe(true);
    });

    it('applies test mode per step (output, responses) and config per step', async () => {
      const probe = tool({
        name: 'test_probe',
        description: 'echo',
        input_schema: { type: 'object', properties: { q: { type: 'string' } } },
        handler: async ({ q }: { q: string }) => `probed ${q}`,
      });
      const agent = new Agent({ name: 'scripted_step', tools: [probe] });
      const workflow = new Workflow({
        name: 'test_mode',
        steps: [
          { id: 'fixed', agent },
          { id: 'stub', tool: probe, args: () => ({ q: 'never' }) },
          { id: 'scripted', agent, depends_on: ['fixed', 'stub'] },
          { id: 'capped', agent, depends_on: ['fixed'] },
        ],
      });
      const toolTurn = { tool_calls: [{ name: 'test_probe', arguments: { q: 'oslo' } }] };
      const result = await run(workflow, 'go', {
        exec_config: {
          test: {
            steps: {
              fixed: { output: 'fixed text' },
              stub: { output: 'stubbed' },
              scripted: { responses: [toolTurn, { output: 'scripted done' }] },
              capped: { responses: [toolTurn, toolTurn, { output: 'too late' }] },
            },
          },
        },
        config: { steps: { capped: { tool_execution: { max_iterations: 1 } } } },
      });
      expect(result.steps).toMatchObject({
        fixed: { status: 'completed', output: 'fixed text' },
        stub: { status: 'completed', output: 'stubbed' },
        scripted: { status: 'completed', output: 'scripted done' },
        capped: { status: 'failed', error: { error_code: 'max_iterations_exceeded' } },
      });
      expect(stepKinds(result, 'fixed')).toEqual(['StepStarted', 'AgentInvoked', 'AgentResponseReceived', 'StepCompleted']);
      expect(stepKinds(result, 'stub')).toEqual(['StepStarted', 'StepCompleted']);
      expect(ofKind(result, 'ProviderRequestSent').every((event) => event.provider_id === 'test')).toBe(true);
      expect(ofKind(result, 'ToolCallCompleted').filter((event) => event.step_id === 'scripted')).toHaveLength(1);
      expect(ofKind(result, 'AgentInvoked').find((event) => event.step_id === 'capped')).toMatchObject({ max_iterations: 1 });
      expect(result.iterations).toBe(3);
      expect(result.status).toBe('failed');
    });

    it("checks a step's given output (test mode) against its agent's output schema, as an answer", async () => {
      const typed = new Agent({ name: 'typed_step', output_schema: amountSchema });
      const workflow = new Workflow({
        name: 'given_typed',
        on_step_failure: 'continue',
        steps: [
          { id: 'good', agent: typed },
          { id: 'bad', agent: typed },
        ],
      });
      const result = await run(workflow, 'go', {
        exec_config: { test: { steps: { good: { output: '{"amount":3,"currency":"EUR"}' }, bad: { output: 'not json' } } } },
      });
      expect(result.steps).toMatchObject({ good: { status: 'completed' }, bad: { status: 'failed', error: { error_code: 'invalid_output' } } });
      expect(JSON.parse(result.steps!.good!.output!)).toEqual({ amount: 3, currency: 'EUR' });
    });

    it('fails a step whose input function throws with input_error, its text in the log only', async () => {
      const workflow = new Workflow({
        name: 'bad_input',
        steps: [
          { id: 'first', agent: new Agent({ name: 'first_agent' }) },
          {
            id: 'second',
            agent: new Agent({ name: 'second_agent' }),
            depends_on: ['first'],
            input: () => {
              throw new Error('secret-ish input trouble');
            },
          },
        ],
      });
      const logger = capturingLogger();
      const { lines } = logger;
      const result = await run(workflow, 'go', { exec_config: { test: { steps: { first: { output: 'ok' } } } }, logger });
      expect(result.status).toBe('failed');
      expect(result.steps?.second).toMatchObject({ status: 'failed', error: { error_code: 'input_error' } });
      expect(stepKinds(result, 'second')).toEqual(['StepStarted', 'StepExecutionFailed']);
      expect(JSON.stringify(result.events)).not.toContain('secret-ish');
      expect(lines.join('\n')).toContain('secret-ish input trouble');
    });

    it('refuses test steps and step configs that are not agent steps of the workflow', async () => {
      const noop = tool({ name: 'noop_refused', description: 'nothing', input_schema: { type: 'object' }, handler: async () => 'ok' });
      const workflow = new Workflow({
        name: 'refusals',
        steps: [
          { id: 'only', agent: new Agent({ name: 'only_agent' }) },
          { id: 'tool_step', tool: noop },
        ],
      });
      await expect(runner(workflow, '{}', { exec_config: { test: { steps: { nope: { output: 'x' } } } } })).rejects.toThrow(
        "exec_config.test.steps.nope: workflow 'refusals' has no step 'nope'",
      );
      await expect(runner(workflow, '{}', { config: { steps: { tool_step: { tool_execution: { max_iterations: 2 } } } } })).rejects.toThrow(
        "config.steps.tool_step: 'tool_step' is a tool step",
      );
      await expect(runner(workflow, '{}', { exec_config: { test: { steps: { tool_step: { responses: [] } } } } })).rejects.toThrow(
        "'tool_step' is a tool step; test mode gives it an 'output'",
      );
    });

    it('runs 50 steps in 10 layers, each layer after the one before; several sinks make a JSON output', async () => {
      const noop = tool({
        name: 'layer_noop',
        description: 'nothing',
        input_schema: { type: 'object', properties: { id: { type: 'string' } } },
        handler: async ({ id }: { id: string }) => `done ${id}`,
      });
      const steps = [];
      for (let layer = 0; layer < 10; layer += 1) {
        for (let index = 0; index < 5; index += 1) {
          const id = `l${layer}_${index}`;
          steps.push({ id, tool: noop, args: () => ({ id }), depends_on: layer === 0 ? [] : [0, 1, 2, 3, 4].map((other) => `l${layer - 1}_${other}`) });
        }
      }
      const workflow = new Workflow({ name: 'layers', steps });
      const result = await run(workflow, 'go', {});
      expect(result.status).toBe('completed');
      expect(Object.values(result.steps ?? {}).every((step) => step.status === 'completed')).toBe(true);
      expect(ofKind(result, 'StepStarted')).toHaveLength(50);
      expect(ofKind(result, 'StepCompleted')).toHaveLength(50);
      expect(JSON.parse(result.output ?? '')).toEqual(Object.fromEntries([0, 1, 2, 3, 4].map((index) => [`l9_${index}`, `done l9_${index}`])));
      const startedAt = new Map(result.events.filter((event) => event.kind === 'StepStarted').map((event) => [event.step_id, event.seq]));
      const completedAt = new Map(result.events.filter((event) => event.kind === 'StepCompleted').map((event) => [event.step_id, event.seq]));
      for (const step of steps) for (const dependency of step.depends_on) expect(completedAt.get(dependency)!).toBeLessThan(startedAt.get(step.id)!);
    });
  });
}
