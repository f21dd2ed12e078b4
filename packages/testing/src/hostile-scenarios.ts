import { Agent, type LocalRun, type TraceEvent, tool } from '@arcflow/core';
import { describe, expect, it } from 'vitest';
import { assertEventInvariants } from './invariants.ts';
import type { ScenarioRunner } from './scenarios.ts';
import { rawCalls, rawTurn } from './raw-turns.ts';
import { reply, scriptedProvider } from './scripted-provider.ts';

const counter = () => {
  const seen: unknown[] = [];
  const echo = tool({
    name: 'echo',
    description: 'echo',
    input_schema: { type: 'object', properties: { n: { type: 'integer', minimum: 0 } } },
    handler: (args: unknown) => {
      seen.push(args);
      return 'ok';
    },
  });
  return { echo, seen };
};

const terminalKinds = new Set(['ToolCallCompleted', 'ToolCallFailed', 'ToolInputValidationFailed', 'LoopDetected']);
const terminalsOf = (run: LocalRun) => run.events.filter((event) => terminalKinds.has(event.kind)) as (TraceEvent & { tool_call_id: string })[];

/**
 * What a model can send that the loop must survive (SPEC §3, "every run ends"): ids that collide
 * or are malformed, token counts that are not counts, numbers JSON cannot carry, and names,
 * finish reasons and models that are huge or hold control characters. Run against every runner.
 */
export function defineHostileOutputScenarios(name: string, runner: ScenarioRunner): void {
  const run = async (...args: Parameters<ScenarioRunner>) => {
    const result = await runner(...args);
    assertEventInvariants(result.events);
    return result;
  };

  describe(`${name}: untrusted model output`, () => {
    it('gives repeated, malformed and missing call ids fresh unique ids, so every call ends once and the run completes', async () => {
      const { echo, seen } = counter();
      const model = scriptedProvider([
        rawCalls([
          ['same', 'echo', '{"n":1}'],
          ['same', 'echo', '{"n":2}'],
          ['x:y', 'echo', '{"n":3}'],
          ['x_y', 'echo', '{"n":4}'],
          ['call_1_6', 'echo', '{"n":5}'],
          [undefined, 'echo', '{"n":6}'],
          ['id\ud800x', 'echo', '{"n":7}'],
        ]),
        reply('done'),
      ]);
      const result = await run(new Agent({ name: 'ids', tools: [echo] }), 'go', { provider: model });
      expect(result.status).toBe('completed');
      expect(seen).toHaveLength(7);
      const ids = terminalsOf(result).map((event) => event.tool_call_id);
      expect(new Set(ids).size).toBe(7);
      for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
      expect(ids).toEqual(expect.arrayContaining(['same', 'x_y', 'call_1_6']));
      // The model sees its turn with the ids the results answer, one result per call, in its order.
      const second = model.requests[1]!.messages;
      const assistant = second.find((message) => message.role === 'assistant') as { tool_calls: readonly { id: string }[] };
      const answered = second.filter((message) => message.role === 'tool').map((message) => (message as { tool_call_id: string }).tool_call_id);
      expect(answered).toEqual(assistant.tool_calls.map((call) => call.id));
    });

    it('records token counts as whole, non-negative, bounded numbers', async () => {
      const { echo } = counter();
      const model = scriptedProvider([
        rawCalls([['a', 'echo', '{}']], { usage: { input: 2.5, output: -7, total: 1e30 } }),
        rawTurn({ content: 'done', tool_calls: [], finish_reason: 'stop', usage: { input: Number.NaN, output: '5', total: 3 } }),
      ]);
      const result = await run(new Agent({ name: 'tokens', tools: [echo] }), 'go', { provider: model });
      expect(result.status).toBe('completed');
      for (const event of result.events) {
        if (event.kind !== 'ProviderResponseReceived' && event.kind !== 'TokensConsumed') continue;
        for (const count of Object.values(event.tokens)) expect(Number.isSafeInteger(count) && count >= 0).toBe(true);
      }
      expect(result.usage).toEqual({ input: 2, output: 0, total: 1_000_000_003 });
    });

    it('refuses a number JSON cannot carry instead of handing the handler a different value', async () => {
      const seen: unknown[] = [];
      // A schema that admits any object: only the loop's own check stands between 1e400 and the handler.
      const free = tool({ name: 'free', description: 'any object', input_schema: { type: 'object' }, handler: (args: unknown) => (seen.push(args), 'ok') });
      const model = scriptedProvider([
        rawCalls([
          ['big', 'free', '{"n": 1e400}'],
          ['ok', 'free', '{"n": 3}'],
        ]),
        reply('done'),
      ]);
      const result = await run(new Agent({ name: 'finite', tools: [free] }), 'go', { provider: model });
      expect(result.status).toBe('completed');
      expect(seen).toEqual([{ n: 3 }]);
      expect(result.events.find((event) => event.kind === 'ToolInputValidationFailed')).toMatchObject({ tool_call_id: 'big' });
    });

    it('bounds huge or control-laden names, finish reasons and models before they reach events', async () => {
      const { echo, seen } = counter();
      const huge = 'x'.repeat(200_000);
      const model = scriptedProvider([
        rawCalls(
          [
            ['a', `echo\n\u001b[31mFORGED`, '{}'],
            ['b', huge, '{}'],
            ['c', 'echo', '{}'],
          ],
          { finish_reason: huge, model: `m\n${huge}` },
        ),
        reply('done'),
      ]);
      const result = await run(new Agent({ name: 'bounded', tools: [echo] }), 'go', { provider: model });
      expect(result.status).toBe('completed');
      expect(seen).toHaveLength(1);
      const text = JSON.stringify(result.events);
      expect(text.length).toBeLessThan(8_000);
      expect(text).not.toMatch(/[\u0000-\u001f]/);
      expect(terminalsOf(result).map((event) => [event.tool_call_id, event.kind, (event as { tool_name?: string }).tool_name])).toEqual([
        ['a', 'ToolCallFailed', 'echo???31mFORGED'],
        ['b', 'ToolCallFailed', `${'x'.repeat(64)}…`],
        ['c', 'ToolCallCompleted', 'echo'],
      ]);
    });

    it('refuses a response with more than 256 tool calls, or over 4 MiB of text and arguments, as malformed: nothing of it runs or is kept, and the retried call answers', async () => {
      const { echo, seen } = counter();
      const crowd = rawCalls(Array.from({ length: 300 }, (_, n) => [`c${n}`, 'echo', `{"n":${n}}`] as const));
      // 2 MiB of text and twelve calls of 250 KiB: each part within its own limit, 4.9 MiB together.
      const bulky = `{"n":1,"pad":"${'p'.repeat(250 * 1024)}"}`;
      const huge = rawCalls(
        Array.from({ length: 12 }, (_, n) => [`h${n}`, 'echo', bulky] as const),
        { content: 'x'.repeat(2 * 1024 * 1024) },
      );
      const model = scriptedProvider([crowd, huge, reply('done')]);
      const result = await run(new Agent({ name: 'bounded', tools: [echo] }), 'go', { provider: model });
      expect(result).toMatchObject({ status: 'completed', output: 'done', iterations: 1 });
      expect(seen).toEqual([]);
      expect(result.events.filter((event) => event.kind === 'ProviderError')).toMatchObject([
        { error_code: 'malformed_response', retryable: true, attempt: 1 },
        { error_code: 'malformed_response', retryable: true, attempt: 2 },
      ]);
      expect(result.events.some((event) => event.kind === 'ToolCallStarted')).toBe(false);
    });

    it('answers oversize arguments as too large without keeping them', async () => {
      const { echo, seen } = counter();
      const model = scriptedProvider([rawCalls([['big', 'echo', `{"n":1,"pad":"${'p'.repeat(300_000)}"}`]]), reply('done')]);
      const result = await run(new Agent({ name: 'oversize', tools: [echo] }), 'go', { provider: model });
      expect(result.status).toBe('completed');
      expect(seen).toEqual([]);
      const resent = JSON.stringify(model.requests[1]!.messages);
      expect(resent.length).toBeLessThan(10_000);
      expect(resent).toContain('arguments are too large');
    });

    it('tells oversize calls apart for loop detection by their size: the same payload repeats, another does not', async () => {
      const { echo } = counter();
      const big = (pad: number) => `{"n":1,"pad":"${'p'.repeat(pad)}"}`;
      const agent = new Agent({ name: 'oversize_loop', tools: [echo], loop_detection: { window: 3, threshold: 2, action: 'terminate' } });
      const differing = await run(agent, 'go', {
        provider: scriptedProvider([
          rawCalls([
            ['a', 'echo', big(300_000)],
            ['b', 'echo', big(300_001)],
          ]),
          reply('done'),
        ]),
      });
      expect(differing.status).toBe('completed');
      const same = await run(agent, 'go', {
        provider: scriptedProvider([
          rawCalls([
            ['a', 'echo', big(300_000)],
            ['b', 'echo', big(300_000)],
          ]),
          reply('done'),
        ]),
      });
      expect(same.error?.error_code).toBe('loop_detected');
    });
  });
}
