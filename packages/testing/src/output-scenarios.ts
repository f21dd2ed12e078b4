import { Agent, type LocalRun, type TraceEvent, Workflow, tool } from '@arcflow/core';
import { describe, expect, it } from 'vitest';
import { assertEventInvariants, assertWorkflowInvariants } from './invariants.ts';
import type { ScenarioRunner } from './scenarios.ts';
import { type ScriptedProvider, type ScriptedTurn, reply, scriptedProvider as localScriptedProvider, toolCall } from './scripted-provider.ts';

const kinds = (run: LocalRun) => run.events.map((event) => event.kind);
const ofKind = <K extends TraceEvent['kind']>(run: LocalRun, kind: K) => run.events.filter((event): event is Extract<TraceEvent, { kind: K }> => event.kind === kind);

const bookSchema = {
  type: 'object',
  properties: { title: { type: 'string' }, year: { type: 'integer' } },
  required: ['title', 'year'],
  additionalProperties: false,
};

/** Structured output (SPEC §11): the answer parses and validates, or the model is told why and asked again. */
export function defineOutputScenarios(name: string, runner: ScenarioRunner, scriptedProvider: (turns: readonly ScriptedTurn[]) => ScriptedProvider = localScriptedProvider): void {
  const run = async (...args: Parameters<ScenarioRunner>) => {
    const result = await runner(...args);
    assertEventInvariants(result.events);
    return result;
  };

  describe(`${name}: structured output`, () => {
    it('asks for the schema, tells the model what was invalid, and completes with the repaired answer as output and output_json', async () => {
      const model = scriptedProvider([reply('{"title": 1965, "year": "Dune"}'), reply('{"title":"Dune","year":1965}')]);
      const agent = new Agent({ name: 'librarian', output_schema: bookSchema });
      const result = await run(agent, 'a book?', { provider: model });
      expect(result.status).toBe('completed');
      expect(result.output).toBe('{"title":"Dune","year":1965}');
      expect(result.output_json).toEqual({ title: 'Dune', year: 1965 });
      expect(result.iterations).toBe(2);
      // The schema fits OpenAI's strict subset (closed, every property required).
      expect(model.requests[0]?.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'librarian', schema: bookSchema, strict: true } });
      expect(model.requests[1]?.response_format).toEqual(model.requests[0]?.response_format);
      expect(model.requests[1]?.messages.slice(-2)).toEqual([
        { role: 'assistant', content: '{"title": 1965, "year": "Dune"}' },
        { role: 'user', content: 'Error: invalid output — title: expected string; year: expected integer' },
      ]);
      expect(ofKind(result, 'OutputValidationFailed')).toEqual([
        expect.objectContaining({ step_id: 's1', iteration: 1, violation_description: 'title: expected string; year: expected integer' }),
      ]);
      expect(kinds(result).slice(2)).toEqual([
        'ProviderRequestSent',
        'ProviderResponseReceived',
        'TokensConsumed',
        'OutputValidationFailed',
        'ProviderRequestSent',
        'ProviderResponseReceived',
        'TokensConsumed',
        'AgentResponseReceived',
        'RunCompleted',
      ]);
      // Path and expectation only: neither answer's values reach the log.
      expect(JSON.stringify(result.events)).not.toMatch(/Dune|1965/);
    });

    it('tells the model its answer is not JSON, and keeps a run-level schema of a plain agent', async () => {
      const schema = { type: 'object', properties: { tags: { type: 'array', items: { type: 'string' } } }, required: ['tags'] };
      const model = scriptedProvider([reply('Sure! {"tags": ["a"]}'), reply('{"tags":["a","b"]}')]);
      const result = await run(new Agent({ name: 'tagger' }), 'tags?', { provider: model, config: { output_schema: schema } });
      expect(result.output_json).toEqual({ tags: ['a', 'b'] });
      // Not closed: sent for guidance, not strict decoding.
      expect(model.requests[0]?.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'tagger', schema, strict: false } });
      expect(model.requests[1]?.messages.at(-1)).toEqual({ role: 'user', content: 'Error: invalid output — output is not valid JSON' });
      expect(ofKind(result, 'OutputValidationFailed').map((event) => event.violation_description)).toEqual(['output is not valid JSON']);
    });

    it('ends the calls beside a final-answer text that fails the schema, each in one terminal event', async () => {
      const count = tool({ name: 'count', description: 'c', input_schema: { type: 'object' }, handler: () => 'x' });
      const agent = new Agent({ name: 'final_fa', tools: [count], output_schema: bookSchema, tool_execution: { max_iterations: 1, on_max_iterations: 'final_answer' } });
      const model = scriptedProvider([
        toolCall('count', { n: 1 }, 'k1'),
        {
          content: 'not json',
          tool_calls: [{ id: 'k2', type: 'function', function: { name: 'count', arguments: '{"n":2}' } }],
          finish_reason: 'tool_calls',
          usage: { input: 1, output: 1, total: 2 },
        },
      ]);
      const result = await run(agent, 'go', { provider: model });
      expect(result.error?.error_code).toBe('invalid_output');
      expect(ofKind(result, 'ToolCallFailed').map((event) => [event.tool_call_id, event.iteration, event.error_code])).toEqual([
        ['k1', 1, 'cancelled'],
        ['k2', 2, 'cancelled'],
      ]);
    });

    it('fails the step with invalid_output once output_retries are spent', async () => {
      const model = scriptedProvider([reply('{"title":"A"}'), reply('nope'), reply('{"title":"never asked"}')]);
      const agent = new Agent({ name: 'stubborn', output_schema: bookSchema, output_retries: 1 });
      const result = await run(agent, 'a book?', { provider: model });
      expect(result.status).toBe('failed');
      expect(result.error).toMatchObject({ code: 'StepExecutionFailed', error_code: 'invalid_output', message: expect.stringContaining('no valid output in 2 answers') });
      expect(result.output).toBeUndefined();
      expect(result.output_json).toBeUndefined();
      expect(result.iterations).toBe(2);
      expect(model.requests).toHaveLength(2);
      expect(ofKind(result, 'OutputValidationFailed').map((event) => [event.iteration, event.violation_description])).toEqual([
        [1, 'year: required'],
        [2, 'output is not valid JSON'],
      ]);
      expect(kinds(result).slice(-3)).toEqual(['OutputValidationFailed', 'StepExecutionFailed', 'RunFailed']);
      expect(ofKind(result, 'RunFailed')[0]).toMatchObject({ error_code: 'invalid_output' });
    });

    it("counts repairs as iterations: an invalid answer to the step's last call fails it with max_iterations_exceeded", async () => {
      const lookup = tool({ name: 'lookup', description: 'l', input_schema: { type: 'object' }, handler: () => 'found' });
      const model = scriptedProvider([toolCall('lookup', {}), reply('{}')]);
      const agent = new Agent({ name: 'capped_output', tools: [lookup], output_schema: bookSchema, tool_execution: { max_iterations: 2 } });
      const result = await run(agent, 'go', { provider: model });
      expect(result.status).toBe('failed');
      expect(result.error).toMatchObject({ error_code: 'max_iterations_exceeded' });
      expect(model.requests.map((request) => request.tools.length)).toEqual([1, 1]);
      expect(ofKind(result, 'OutputValidationFailed')).toEqual([expect.objectContaining({ iteration: 2, violation_description: 'title: required; year: required' })]);
    });

    it('checks a test-mode output against the schema: parsed when valid, the step failed when not', async () => {
      const agent = new Agent({ name: 'fixed_output', output_schema: bookSchema });
      const valid = await run(agent, 'go', { exec_config: { test: { steps: { s1: { output: '{"title":"T","year":1}' } } } } });
      expect(valid.output_json).toEqual({ title: 'T', year: 1 });
      const invalid = await run(agent, 'go', { exec_config: { test: { steps: { s1: { output: 'plain text' } } } } });
      expect(invalid.status).toBe('failed');
      expect(invalid.error).toMatchObject({ error_code: 'invalid_output' });
      expect(kinds(invalid)).toEqual(['RunEnqueued', 'AgentInvoked', 'OutputValidationFailed', 'StepExecutionFailed', 'RunFailed']);
    });

    it("repairs a workflow agent step's answer under its step config's schema; the step's output is the JSON text", async () => {
      const model = scriptedProvider([reply('{"title":"Dune"}'), reply('{"title":"Dune","year":1965}')]);
      const workflow = new Workflow({ name: 'catalogue', steps: [{ id: 'extract', agent: new Agent({ name: 'cataloguer' }) }] });
      const result = await runner(workflow, 'a book?', { provider: model, config: { steps: { extract: { output_schema: bookSchema } } } });
      assertWorkflowInvariants(result.events);
      expect(result.status).toBe('completed');
      expect(result.steps?.extract).toMatchObject({ status: 'completed', output: '{"title":"Dune","year":1965}' });
      expect(model.requests[1]?.messages.at(-1)).toEqual({ role: 'user', content: 'Error: invalid output — year: required' });
      expect(ofKind(result, 'OutputValidationFailed')).toEqual([expect.objectContaining({ step_id: 'extract', iteration: 1 })]);
    });

    it('leaves a run without a schema as it was: no response_format, no output_json', async () => {
      const model = scriptedProvider([reply('{"not": "checked"}')]);
      const result = await run(new Agent({ name: 'free_text' }), 'go', { provider: model });
      expect(result.output).toBe('{"not": "checked"}');
      expect('output_json' in result).toBe(false);
      expect(model.requests[0]).not.toHaveProperty('response_format');
    });
  });
}
