import { Agent, type LocalRun, type Workflow, type ModelProvider, type ToolLogger, ToolArgumentError, type TraceEvent, tool } from '@arcflow/core';
import { describe, expect, it } from 'vitest';
import { capturingLogger } from './capturing-logger.ts';
import { assertEventInvariants } from './invariants.ts';
import { type ScriptedProvider, type ScriptedTurn, reply, scriptedProvider as localScriptedProvider, toolCall, toolCalls } from './scripted-provider.ts';

/** Runs one agent (or workflow) to its end: `runLocal`, or enqueue-and-wait on the queue engine. */
export type ScenarioRunner = (
  agent: Agent | Workflow,
  input: string,
  options: { provider?: ModelProvider; exec_config?: unknown; config?: unknown; logger?: ToolLogger; state?: Readonly<Record<string, unknown>> },
) => Promise<LocalRun>;

const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string' }, units: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
  required: ['city'],
};

const kinds = (run: LocalRun) => run.events.map((event) => event.kind);
const ofKind = <K extends TraceEvent['kind']>(run: LocalRun, kind: K) => run.events.filter((event): event is Extract<TraceEvent, { kind: K }> => event.kind === kind);
const toolMessages = (request: { messages: readonly { role: string }[] } | undefined) =>
  (request?.messages ?? []).filter((message) => message.role === 'tool') as { role: 'tool'; tool_call_id: string; content: string }[];

/**
 * The loop's scenarios of SPEC §3, written once and run against every runner. Each scenario
 * checks the log's invariants too.
 */
export function defineLoopScenarios(name: string, runner: ScenarioRunner, scriptedProvider: (turns: readonly ScriptedTurn[]) => ScriptedProvider = localScriptedProvider): void {
  const run = async (...args: Parameters<ScenarioRunner>) => {
    const result = await runner(...args);
    assertEventInvariants(result.events);
    return result;
  };

  describe(`${name}: the loop`, () => {
    it('answers with text in one iteration and records the full event sequence', async () => {
      const model = scriptedProvider([reply('Hello.')]);
      const agent = new Agent({ name: 'greeter', instructions: 'Be brief.' });
      const result = await run(agent, 'Hi', { provider: model });
      expect(result.status).toBe('completed');
      expect(result.output).toBe('Hello.');
      expect(result.iterations).toBe(1);
      expect(result.usage).toEqual({ input: 10, output: 5, total: 15 });
      expect(kinds(result)).toEqual(['RunEnqueued', 'AgentInvoked', 'ProviderRequestSent', 'ProviderResponseReceived', 'TokensConsumed', 'AgentResponseReceived', 'RunCompleted']);
      expect(result.events.every((event) => event.run_id === result.run_id && event.step_id === 's1')).toBe(true);
      expect(ofKind(result, 'ProviderRequestSent')[0]).toMatchObject({ provider_id: 'scripted', model_id: 'scripted-model', iteration: 1, tools_count: 0 });
    });

    it('runs three calls of one turn in parallel and returns results in call order, whatever order they finished in', async () => {
      const delays: Record<string, number> = { Oslo: 600, Rome: 300, Lima: 0 };
      const weather = tool({
        name: 'get_weather',
        description: 'weather',
        input_schema: weatherSchema,
        handler: async ({ city }: { city: string }) => {
          await new Promise((resolve) => setTimeout(resolve, delays[city]));
          return `sunny in ${city}`;
        },
      });
      const model = scriptedProvider([
        toolCalls([
          { name: 'get_weather', args: { city: 'Oslo' }, id: 'c1' },
          { name: 'get_weather', args: { city: 'Rome' }, id: 'c2' },
          { name: 'get_weather', args: { city: 'Lima' }, id: 'c3' },
        ]),
        reply('done'),
      ]);
      const result = await run(new Agent({ name: 'parallel', tools: [weather] }), 'weather?', { provider: model });
      expect(result.status).toBe('completed');
      expect(ofKind(result, 'ToolCallCompleted').map((event) => event.tool_call_id)).toEqual(['c3', 'c2', 'c1']);
      expect(toolMessages(model.requests[1])).toEqual([
        { role: 'tool', tool_call_id: 'c1', content: 'sunny in Oslo' },
        { role: 'tool', tool_call_id: 'c2', content: 'sunny in Rome' },
        { role: 'tool', tool_call_id: 'c3', content: 'sunny in Lima' },
      ]);
    });

    it('answers a schema violation to the model while its siblings still run', async () => {
      let executions = 0;
      const weather = tool({
        name: 'get_weather',
        description: 'weather',
        input_schema: weatherSchema,
        handler: ({ city }: { city: string }) => (executions++, `mild in ${city}`),
      });
      const model = scriptedProvider([
        toolCalls([
          { name: 'get_weather', args: { city: 42 }, id: 'bad' },
          { name: 'get_weather', args: { city: 'Oslo' }, id: 'good' },
        ]),
        reply('Which city?'),
      ]);
      const result = await run(new Agent({ name: 'validator', tools: [weather] }), 'weather?', { provider: model });
      expect(result.status).toBe('completed');
      expect(executions).toBe(1);
      const badEvents = result.events.filter((event) => 'tool_call_id' in event && event.tool_call_id === 'bad');
      expect(badEvents.map((event) => event.kind)).toEqual(['ToolCallStarted', 'ToolInputValidationFailed']);
      expect(badEvents[1]).toMatchObject({ tool_name: 'get_weather', violation_description: 'city: expected string', input_schema_hash: weather.input_schema_hash });
      expect(toolMessages(model.requests[1])).toEqual([
        { role: 'tool', tool_call_id: 'bad', content: 'Error: invalid arguments — city: expected string' },
        { role: 'tool', tool_call_id: 'good', content: 'mild in Oslo' },
      ]);
    });

    it('answers unknown tools and arguments that are not JSON without running anything', async () => {
      let executions = 0;
      const weather = tool({ name: 'get_weather', description: 'weather', input_schema: weatherSchema, handler: () => (executions++, 'x') });
      const model = scriptedProvider([
        toolCalls([
          { name: 'launch_rockets', args: {}, id: 'u1' },
          { name: 'get_weather', args: '{"city": "Oslo"', id: 'j1' },
          { name: 'functions.get_weather', args: {}, id: 'u2' },
          { name: 'wétter', args: {}, id: 'u3' },
        ]),
        reply('ok'),
      ]);
      const result = await run(new Agent({ name: 'confused', tools: [weather] }), 'go', { provider: model });
      expect(executions).toBe(0);
      expect(toolMessages(model.requests[1]).map((message) => message.content)).toEqual([
        "Error: unknown tool 'launch_rockets'",
        'Error: invalid arguments — arguments are not valid JSON',
        "Error: unknown tool 'functions.get_weather'",
        "Error: unknown tool 'wétter'",
      ]);
      expect(ofKind(result, 'ToolCallFailed')).toEqual([
        expect.objectContaining({ tool_call_id: 'u1', error_code: 'unknown_tool', tool_name: 'launch_rockets' }),
        expect.objectContaining({ tool_call_id: 'u2', error_code: 'unknown_tool', tool_name: 'functions.get_weather' }),
        expect.objectContaining({ tool_call_id: 'u3', error_code: 'unknown_tool', tool_name: 'wétter' }),
      ]);
      expect(ofKind(result, 'ToolInputValidationFailed')).toEqual([expect.objectContaining({ tool_call_id: 'j1', violation_description: 'arguments are not valid JSON' })]);
    });

    it('runs calls whose ids name properties every object has (constructor, __proto__) under fresh ids', async () => {
      const weather = tool({ name: 'get_weather', description: 'w', input_schema: weatherSchema, handler: ({ city }: { city: string }) => `mild in ${city}` });
      const model = scriptedProvider([
        toolCalls([
          { name: 'get_weather', args: { city: 'Oslo' }, id: 'constructor' },
          { name: 'get_weather', args: { city: 'Rome' }, id: '__proto__' },
        ]),
        reply('ok'),
      ]);
      const result = await run(new Agent({ name: 'protos', tools: [weather] }), 'go', { provider: model });
      expect(result.status).toBe('completed');
      expect(toolMessages(model.requests[1]).map((message) => message.content)).toEqual(['mild in Oslo', 'mild in Rome']);
      expect(ofKind(result, 'ToolCallCompleted').map((event) => event.tool_call_id)).toEqual(['call_1_1', 'call_1_2']);
    });

    it('keeps text with a lone surrogate half as every store keeps it (U+FFFD), in the answer and in a tool result', async () => {
      const broken = tool({ name: 'broken', description: 'b', input_schema: { type: 'object' }, handler: () => 'x\udc00y' });
      const model = scriptedProvider([toolCall('broken', {}, 'b1'), reply('a\ud800b')]);
      const result = await run(new Agent({ name: 'surrogates', tools: [broken] }), 'go', { provider: model });
      expect(result.output).toBe('a\ufffdb');
      expect(toolMessages(model.requests[1]).map((message) => message.content)).toEqual(['x\ufffdy']);
    });

    it('answers arguments over the size limit as invalid without running the tool', async () => {
      let executions = 0;
      const weather = tool({ name: 'get_weather', description: 'weather', input_schema: weatherSchema, handler: () => (executions++, 'x') });
      const model = scriptedProvider([toolCall('get_weather', { city: 'x'.repeat(300_000) }, 'huge'), reply('ok')]);
      const result = await run(new Agent({ name: 'flooded', tools: [weather] }), 'go', { provider: model });
      expect(executions).toBe(0);
      expect(toolMessages(model.requests[1])[0]?.content).toBe('Error: invalid arguments — arguments are too large (300011 bytes; the limit is 262144)');
      expect(ofKind(result, 'ToolInputValidationFailed')[0]).toMatchObject({
        tool_call_id: 'huge',
        violation_description: 'arguments are too large (300011 bytes; the limit is 262144)',
      });
    });

    it('hides a plain handler error from the model and the events, and logs it for the worker', async () => {
      const secret = 'db password is hunter2';
      const broken = tool({
        name: 'broken',
        description: 'fails',
        input_schema: { type: 'object' },
        handler: () => {
          throw new Error(secret);
        },
      });
      const logger = capturingLogger();
      const model = scriptedProvider([toolCall('broken', {}, 'b1'), reply('sorry')]);
      const result = await run(new Agent({ name: 'unlucky', tools: [broken] }), 'go', { provider: model, logger });
      expect(result.status).toBe('completed');
      expect(toolMessages(model.requests[1])[0]?.content).toBe('Error: tool temporarily unavailable');
      expect(ofKind(result, 'ToolCallFailed')[0]).toMatchObject({ error_code: 'tool_error', tool_call_id: 'b1' });
      expect(JSON.stringify(result)).not.toContain('hunter2');
      expect(JSON.stringify(model.requests)).not.toContain('hunter2');
      expect(logger.lines.join('\n')).toContain('hunter2');
    });

    it('shows a ToolArgumentError message to the model as invalid arguments', async () => {
      const picky = tool({
        name: 'picky',
        description: 'picky',
        input_schema: weatherSchema,
        handler: () => {
          throw new ToolArgumentError('city must be a real place');
        },
      });
      const model = scriptedProvider([toolCall('picky', { city: 'Atlantis' }, 'p1'), reply('ok')]);
      const result = await run(new Agent({ name: 'picky-agent', tools: [picky] }), 'go', { provider: model });
      expect(toolMessages(model.requests[1])[0]?.content).toBe('Error: invalid arguments — city must be a real place');
      expect(ofKind(result, 'ToolCallFailed')[0]).toMatchObject({ error_code: 'invalid_arguments' });
      expect(JSON.stringify(result.events)).not.toContain('real place');
    });

    it('times a tool out, aborts its signal and tells the model', async () => {
      let aborted = false;
      const slow = tool({
        name: 'slow',
        description: 'slow',
        input_schema: { type: 'object' },
        timeout_ms: 150,
        handler: (_args, ctx) =>
          new Promise((resolve) =>
            ctx.signal.addEventListener('abort', () => {
              aborted = true;
              resolve('late');
            }),
          ),
      });
      const model = scriptedProvider([toolCall('slow', {}, 's1c'), reply('gave up')]);
      const result = await run(new Agent({ name: 'patient', tools: [slow] }), 'go', { provider: model });
      expect(aborted).toBe(true);
      expect(toolMessages(model.requests[1])[0]?.content).toBe('Error: tool timed out — try again or use a different approach');
      expect(ofKind(result, 'ToolCallFailed')[0]).toMatchObject({ error_code: 'timeout' });
    });

    it('retries a failing handler under `retries` and passes attempt and idempotency key', async () => {
      const seen: { attempt: number; key: string }[] = [];
      const flaky = tool({
        name: 'flaky',
        description: 'flaky',
        input_schema: { type: 'object' },
        retries: 1,
        handler: (_args, ctx) => {
          seen.push({ attempt: ctx.attempt, key: ctx.idempotency_key });
          if (ctx.attempt === 1) throw new Error('transient');
          return 'fine';
        },
      });
      const model = scriptedProvider([toolCall('flaky', {}, 'f1'), reply('ok')]);
      const result = await run(new Agent({ name: 'retrier', tools: [flaky] }), 'go', { provider: model, logger: capturingLogger() });
      expect(seen.map((entry) => entry.attempt)).toEqual([1, 2]);
      expect(new Set(seen.map((entry) => entry.key))).toEqual(new Set([`${result.run_id}:s1:1:f1`]));
      expect(ofKind(result, 'ToolCallStarted').map((event) => event.attempt)).toEqual([1, 2]);
      expect(toolMessages(model.requests[1])[0]?.content).toBe('fine');
    });

    it('cuts results larger than max_result_bytes and says how much was cut', async () => {
      const big = tool({ name: 'big', description: 'big', input_schema: { type: 'object' }, max_result_bytes: 1024, handler: () => 'x'.repeat(5000) });
      const model = scriptedProvider([toolCall('big', {}, 'g1'), reply('ok')]);
      const result = await run(new Agent({ name: 'hoarder', tools: [big] }), 'go', { provider: model });
      const content = toolMessages(model.requests[1])[0]?.content ?? '';
      expect(content.startsWith('x'.repeat(1024))).toBe(true);
      expect(content).toContain('[result truncated: 3976 of 5000 bytes cut]');
      expect(ofKind(result, 'ToolCallCompleted')[0]?.output_size_bytes).toBe(Buffer.byteLength(content));
    });

    it("fails the step at max_iterations without executing the last turn's calls", async () => {
      let executions = 0;
      const counter = tool({ name: 'count', description: 'count', input_schema: { type: 'object' }, handler: () => String(++executions) });
      const model = scriptedProvider([toolCall('count', { n: 1 }, 'k1'), toolCall('count', { n: 2 }, 'k2'), reply('never')]);
      const agent = new Agent({ name: 'greedy', tools: [counter], tool_execution: { max_iterations: 5 } });
      const result = await run(agent, 'go', { provider: model, config: { tool_execution: { max_iterations: 2 } } });
      expect(executions).toBe(1);
      // The last turn's call is not executed, and still ends in one terminal event (SPEC §4), with nothing started.
      expect(ofKind(result, 'ToolCallFailed')).toEqual([expect.objectContaining({ tool_call_id: 'k2', iteration: 2, error_code: 'cancelled', duration_ms: 0 })]);
      expect(ofKind(result, 'ToolCallStarted').map((event) => event.tool_call_id)).toEqual(['k1']);
      expect(model.requests).toHaveLength(2);
      expect(result.status).toBe('failed');
      expect(result.error).toMatchObject({ code: 'StepExecutionFailed', error_code: 'max_iterations_exceeded' });
      // It fails inside the iteration whose response asked for tools once more (SPEC §4: `iteration` inside an iteration).
      expect(ofKind(result, 'StepExecutionFailed')[0]).toMatchObject({ error_code: 'max_iterations_exceeded', iteration: 2 });
      expect(ofKind(result, 'RunFailed')[0]).toMatchObject({ error_code: 'max_iterations_exceeded', usage: { input: 20, output: 10, total: 30 } });
      expect(ofKind(result, 'AgentInvoked')[0]).toMatchObject({ max_iterations: 2, mode: 'llm_select' });
    });

    it('makes one more call with tools disabled under on_max_iterations: final_answer', async () => {
      let executions = 0;
      const counter = tool({ name: 'count', description: 'count', input_schema: { type: 'object' }, handler: () => String(++executions) });
      const model = scriptedProvider([toolCall('count', { n: 1 }), reply('Best I can do.')]);
      const agent = new Agent({ name: 'frugal', tools: [counter], tool_execution: { max_iterations: 1, on_max_iterations: 'final_answer' } });
      const result = await run(agent, 'go', { provider: model });
      expect(executions).toBe(0);
      expect(result.status).toBe('completed');
      expect(result.output).toBe('Best I can do.');
      expect(model.requests[1]?.tools).toEqual([]);
      expect(model.requests[1]?.messages.at(-1)).toMatchObject({ role: 'user', content: expect.stringContaining('tool budget') });
      expect(ofKind(result, 'ProviderRequestSent').map((event) => event.tools_count)).toEqual([1, 0]);
      expect(ofKind(result, 'ToolCallFailed')).toEqual([expect.objectContaining({ iteration: 1, error_code: 'cancelled' })]);
    });

    it('injects the previous result for a repeated call (loop detection, inject)', async () => {
      let executions = 0;
      const weather = tool({ name: 'get_weather', description: 'w', input_schema: weatherSchema, handler: ({ city }: { city: string }) => `rain in ${city} #${++executions}` });
      const model = scriptedProvider([toolCall('get_weather', { city: 'Oslo' }, 'a'), toolCall('get_weather', { city: 'Oslo' }, 'b'), reply('ok')]);
      const agent = new Agent({ name: 'looper', tools: [weather], loop_detection: { window: 3, threshold: 2, action: 'inject' } });
      const result = await run(agent, 'go', { provider: model });
      expect(executions).toBe(1);
      expect(toolMessages(model.requests[2]).at(-1)?.content).toBe(
        'You already called this tool with these arguments: the result was rain in Oslo #1. Please proceed to the next step.',
      );
      expect(ofKind(result, 'LoopDetected')[0]).toMatchObject({ tool_call_id: 'b', repeats: 2, window: 3, action: 'inject', iteration: 2 });
      expect(result.status).toBe('completed');
    });

    it('fails the step on a repeated call under loop detection terminate', async () => {
      const weather = tool({ name: 'get_weather', description: 'w', input_schema: weatherSchema, handler: () => 'rain' });
      const model = scriptedProvider([
        toolCall('get_weather', { city: 'Oslo', units: 'celsius' }, 'a'),
        toolCalls([
          { name: 'get_weather', args: { city: 'Bergen' }, id: 'b' },
          { name: 'get_weather', args: { units: 'celsius', city: 'Oslo' }, id: 'c' },
        ]),
        reply('x'),
      ]);
      const agent = new Agent({ name: 'stopper', tools: [weather], loop_detection: { window: 3, threshold: 2, action: 'terminate' } });
      const result = await run(agent, 'go', { provider: model });
      expect(result.status).toBe('failed');
      expect(result.error?.error_code).toBe('loop_detected');
      expect(ofKind(result, 'StepExecutionFailed')[0]).toMatchObject({ error_code: 'loop_detected' });
      // The repeat ends in its LoopDetected; the call beside it, not executed, in a ToolCallFailed.
      expect(ofKind(result, 'LoopDetected')).toEqual([expect.objectContaining({ tool_call_id: 'c', action: 'terminate' })]);
      expect(ofKind(result, 'ToolCallFailed')).toEqual([expect.objectContaining({ tool_call_id: 'b', error_code: 'cancelled' })]);
    });

    it('executes repeated calls when loop detection is off', async () => {
      let executions = 0;
      const weather = tool({ name: 'get_weather', description: 'w', input_schema: weatherSchema, handler: () => `rain #${++executions}` });
      const model = scriptedProvider([toolCall('get_weather', { city: 'Oslo' }), toolCall('get_weather', { city: 'Oslo' }), reply('ok')]);
      const result = await run(new Agent({ name: 'free', tools: [weather], loop_detection: false }), 'go', { provider: model });
      expect(executions).toBe(2);
      expect(ofKind(result, 'LoopDetected')).toHaveLength(0);
    });

    it('runs the calls one after another in order under legacy_eager', async () => {
      const log: string[] = [];
      const step = tool({
        name: 'step',
        description: 's',
        input_schema: { type: 'object', properties: { n: { type: 'integer' } } },
        handler: async ({ n }: { n: number }) => {
          log.push(`start ${n}`);
          await new Promise((resolve) => setTimeout(resolve, 30 - n * 10));
          log.push(`end ${n}`);
          return `done ${n}`;
        },
      });
      const model = scriptedProvider([
        toolCalls([
          { name: 'step', args: { n: 1 }, id: 'e1' },
          { name: 'launch_rockets', args: {}, id: 'e2' },
          { name: 'step', args: { n: 2 }, id: 'e3' },
          { name: 'step', args: { n: 'three' }, id: 'e4' },
        ]),
        reply('ok'),
      ]);
      const agent = new Agent({ name: 'eager', tools: [step], tool_execution: { mode: 'legacy_eager' } });
      const result = await run(agent, 'go', { provider: model });
      expect(log).toEqual(['start 1', 'end 1', 'start 2', 'end 2']);
      expect(ofKind(result, 'AgentInvoked')[0]?.mode).toBe('legacy_eager');
      expect(toolMessages(model.requests[1]).map((message) => message.content)).toEqual([
        'done 1',
        "Error: unknown tool 'launch_rockets'",
        'done 2',
        'Error: invalid arguments — n: expected integer',
      ]);
      // Each call in the model's order: validated, executed and recorded before the next (SPEC §3).
      const terminals = result.events.filter((event) => ['ToolCallCompleted', 'ToolCallFailed', 'ToolInputValidationFailed'].includes(event.kind));
      expect(terminals.map((event) => (event as { tool_call_id: string }).tool_call_id)).toEqual(['e1', 'e2', 'e3', 'e4']);
    });

    it('completes a test-mode step with its fixed output and no provider call', async () => {
      const model = scriptedProvider([]);
      const result = await run(new Agent({ name: 'tested' }), 'go', {
        provider: model,
        exec_config: { test: { steps: { s1: { output: 'Final answer without live tools' } } } },
      });
      expect(result.output).toBe('Final answer without live tools');
      expect(model.requests).toHaveLength(0);
      expect(kinds(result)).toEqual(['RunEnqueued', 'AgentInvoked', 'AgentResponseReceived', 'RunCompleted']);
    });

    it('replays test-mode responses with real validation and real tools', async () => {
      const cities: string[] = [];
      const weather = tool({ name: 'get_weather', description: 'w', input_schema: weatherSchema, handler: ({ city }: { city: string }) => (cities.push(city), 'mild') });
      const result = await run(new Agent({ name: 'scripted', tools: [weather] }), 'go', {
        exec_config: {
          test: {
            steps: {
              s1: {
                responses: [
                  {
                    tool_calls: [
                      { name: 'get_weather', arguments: { city: 'Oslo' } },
                      { name: 'get_weather', arguments: { city: 7 } },
                    ],
                  },
                  { output: 'It is mild in Oslo.' },
                ],
              },
            },
          },
        },
      });
      expect(result.output).toBe('It is mild in Oslo.');
      expect(cities).toEqual(['Oslo']);
      expect(ofKind(result, 'ProviderRequestSent').every((event) => event.provider_id === 'test')).toBe(true);
      expect(ofKind(result, 'ToolInputValidationFailed')).toHaveLength(1);
    });

    it('keeps input, instructions, arguments and results out of every event', async () => {
      const canary = 'CANARY_7f3a';
      const echo = tool({ name: 'echo', description: 'echo', input_schema: { type: 'object' }, handler: (args: unknown) => `${canary}-result ${JSON.stringify(args)}` });
      const model = scriptedProvider([toolCall('echo', { text: `${canary}-args` }), reply(`${canary}-output`)]);
      const agent = new Agent({ name: 'leaky', instructions: `${canary}-instructions`, tools: [echo] });
      const result = await run(agent, `${canary}-input`, { provider: model });
      expect(result.status).toBe('completed');
      expect(JSON.stringify(model.requests)).toContain(`${canary}-args`);
      expect(JSON.stringify(result.events)).not.toContain(canary);
    });
  });
}
