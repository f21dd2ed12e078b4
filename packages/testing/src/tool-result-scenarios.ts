import {
  Agent,
  type ApprovalAnswer,
  type ApprovalRequest,
  type JsonSchema,
  type LocalRun,
  type ModelProvider,
  type ToolResultInput,
  type ToolResultRequest,
  type TraceEvent,
  tool,
} from '@arcflow/core';
import { describe, expect, it } from 'vitest';
import { assertEventInvariants } from './invariants.ts';
import { reply, scriptedProvider, toolCalls } from './scripted-provider.ts';

/**
 * Runs an agent whose calls wait outside (SPEC §10, §20) to its end: `runLocal` with its `approve`
 * and `toolResult` options, or the queue engine answering through the client as calls wait.
 * `cancelWhenWaiting`: the run is cancelled once a call waits for its result.
 */
export type WaitingScenarioRunner = (
  agent: Agent,
  input: string,
  options: {
    provider: ModelProvider;
    toolResult?: (request: ToolResultRequest) => ToolResultInput | Promise<ToolResultInput>;
    approve?: (request: ApprovalRequest) => ApprovalAnswer | Promise<ApprovalAnswer>;
    cancelWhenWaiting?: boolean;
  },
) => Promise<LocalRun>;

const ofKind = <K extends TraceEvent['kind']>(run: LocalRun, kind: K) => run.events.filter((event): event is Extract<TraceEvent, { kind: K }> => event.kind === kind);
const toolMessages = (provider: { requests: { messages: readonly { role: string }[] }[] }, index: number) =>
  (provider.requests[index]?.messages ?? []).filter((message) => message.role === 'tool') as { role: 'tool'; tool_call_id: string; content: string }[];

/** The user's location, which only the browser knows: a tool without a handler. */
const locate = (options: { output_schema?: JsonSchema; result_timeout_ms?: number; needs_approval?: boolean } = {}) =>
  tool({
    name: 'get_location',
    description: "The user's location, from their browser",
    input_schema: { type: 'object', properties: { reason: { type: 'string' } } },
    ...options,
  });

const never = () => new Promise<never>(() => {});

/** Results from outside (SPEC §20): external tools and deferred handlers, written once and run against every runner. */
export function defineToolResultScenarios(name: string, runner: WaitingScenarioRunner): void {
  const run = async (...args: Parameters<WaitingScenarioRunner>) => {
    const result = await runner(...args);
    assertEventInvariants(result.events);
    return result;
  };

  describe(`${name}: results from outside`, () => {
    it('waits for a browser tool’s result without executing it; its output completes the call and the model reads it', async () => {
      const provider = scriptedProvider([toolCalls([{ name: 'get_location', args: { reason: 'weather' }, id: 'call_loc' }]), reply('You are in Oslo.')]);
      const asked: ToolResultRequest[] = [];
      const result = await run(new Agent({ name: 'browser-agent', tools: [locate()] }), 'Where am I?', {
        provider,
        toolResult: (request) => {
          asked.push(request);
          return { output: { city: 'Oslo' } };
        },
      });
      expect(result.status).toBe('completed');
      expect(result.output).toBe('You are in Oslo.');
      expect(asked).toEqual([{ step_id: 's1', iteration: 1, tool_call_id: 'call_loc', tool_name: 'get_location', arguments: { reason: 'weather' } }]);
      const [requested] = ofKind(result, 'ToolResultRequested');
      expect(Object.keys(requested!).sort()).toEqual(
        ['expires_at', 'input_schema_hash', 'input_size_bytes', 'iteration', 'kind', 'run_id', 'seq', 'step_id', 'tool_call_id', 'tool_name', 'ts'].sort(),
      );
      expect(requested!.expires_at - requested!.ts).toBeGreaterThan(23 * 3600 * 1000);
      expect(ofKind(result, 'ToolCallStarted')).toEqual([]);
      expect(ofKind(result, 'ToolCallCompleted').map((event) => event.tool_call_id)).toEqual(['call_loc']);
      expect(toolMessages(provider, 1)).toEqual([{ role: 'tool', tool_call_id: 'call_loc', content: '{"city":"Oslo"}' }]);
    });

    it('fails the call with the error the browser gives: the model reads `Error: <error>`, ToolCallFailed (tool_error)', async () => {
      const provider = scriptedProvider([toolCalls([{ name: 'get_location', args: {}, id: 'call_loc' }]), reply('I could not tell.')]);
      const result = await run(new Agent({ name: 'browser-agent', tools: [locate()] }), 'Where am I?', {
        provider,
        toolResult: () => ({ error: 'the user denied location access' }),
      });
      expect(result.status).toBe('completed');
      expect(ofKind(result, 'ToolCallFailed').map((event) => event.error_code)).toEqual(['tool_error']);
      expect(toolMessages(provider, 1)[0]!.content).toBe('Error: the user denied location access');
    });

    it('refuses an output its output_schema does not admit and goes on waiting; the next answer completes it', async () => {
      const provider = scriptedProvider([toolCalls([{ name: 'get_location', args: {}, id: 'call_loc' }]), reply('Oslo it is.')]);
      const answers: ToolResultInput[] = [{ output: { city: 5 } }, { output: { city: 'Oslo' } }];
      let asked = 0;
      const output_schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
      const result = await run(new Agent({ name: 'browser-agent', tools: [locate({ output_schema })] }), 'Where am I?', {
        provider,
        toolResult: () => answers[Math.min(asked++, 1)]!,
      });
      expect(result.status).toBe('completed');
      expect(asked).toBe(2);
      expect(ofKind(result, 'ToolResultRequested')).toHaveLength(1);
      expect(toolMessages(provider, 1)[0]!.content).toBe('{"city":"Oslo"}');
    });

    it('fails a call no result came for in time: `Error: no result came in time`, ToolCallFailed (result_timeout)', async () => {
      const provider = scriptedProvider([toolCalls([{ name: 'get_location', args: {}, id: 'call_loc' }]), reply('No location.')]);
      const started = Date.now();
      const result = await run(new Agent({ name: 'browser-agent', tools: [locate({ result_timeout_ms: 300 })] }), 'Where am I?', { provider, toolResult: never });
      expect(result.status).toBe('completed');
      expect(Date.now() - started).toBeGreaterThanOrEqual(300);
      expect(ofKind(result, 'ToolCallFailed').map((event) => event.error_code)).toEqual(['result_timeout']);
      expect(toolMessages(provider, 1)[0]!.content).toBe('Error: no result came in time');
    });

    it('cancels a call waiting for its result with its run: ToolCallFailed (cancelled)', async () => {
      const provider = scriptedProvider([toolCalls([{ name: 'get_location', args: {}, id: 'call_loc' }]), reply('unreachable')]);
      const result = await run(new Agent({ name: 'browser-agent', tools: [locate()] }), 'Where am I?', { provider, toolResult: never, cancelWhenWaiting: true });
      expect(result.status).toBe('cancelled');
      expect(ofKind(result, 'ToolCallFailed').map((event) => [event.tool_call_id, event.error_code])).toEqual([['call_loc', 'cancelled']]);
      expect(provider.requests).toHaveLength(1);
    });

    it('waits for the approval first, then for the result', async () => {
      const provider = scriptedProvider([toolCalls([{ name: 'get_location', args: {}, id: 'call_loc' }]), reply('You are in Oslo.')]);
      const order: string[] = [];
      const result = await run(new Agent({ name: 'browser-agent', tools: [locate({ needs_approval: true })] }), 'Where am I?', {
        provider,
        approve: () => {
          order.push('approve');
          return { approved: true, by: 'alice' };
        },
        toolResult: () => {
          order.push('result');
          return { output: 'Oslo' };
        },
      });
      expect(result.status).toBe('completed');
      expect(order).toEqual(['approve', 'result']);
      const kinds = result.events.filter((event) => event.kind.startsWith('Tool')).map((event) => event.kind);
      expect(kinds).toEqual(['ToolApprovalRequested', 'ToolApprovalResolved', 'ToolResultRequested', 'ToolCallCompleted']);
      expect(toolMessages(provider, 1)[0]!.content).toBe('Oslo');
    });

    it('lets a handler defer: its job ends, the call waits for its result, and the state it changed before is kept', async () => {
      let executions = 0;
      const pay = tool({
        name: 'start_payment',
        description: 'Starts a payment; the bank answers later',
        input_schema: { type: 'object', properties: { amount: { type: 'number' } }, required: ['amount'] },
        handler: (_args: { amount: number }, ctx) => {
          executions += 1;
          ctx.state.set('payment', 'started');
          return ctx.defer({ timeout_ms: 60_000 });
        },
      });
      const provider = scriptedProvider([toolCalls([{ name: 'start_payment', args: { amount: 12 }, id: 'call_pay' }]), reply('Paid.')]);
      const result = await run(new Agent({ name: 'payer', tools: [pay] }), 'Pay 12', { provider, toolResult: () => ({ output: { paid: true } }) });
      expect(result.status).toBe('completed');
      expect(executions).toBe(1);
      const kinds = result.events.filter((event) => event.kind.startsWith('Tool')).map((event) => event.kind);
      expect(kinds).toEqual(['ToolCallStarted', 'ToolResultRequested', 'ToolCallCompleted']);
      expect(ofKind(result, 'ToolResultRequested')[0]!.expires_at - ofKind(result, 'ToolResultRequested')[0]!.ts).toBeLessThanOrEqual(60_000);
      expect(result.state).toEqual({ payment: 'started' });
      expect(toolMessages(provider, 1)[0]!.content).toBe('{"paid":true}');
    });
  });
}
