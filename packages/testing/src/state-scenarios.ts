import { Agent, type LocalRun, type TraceEvent, Workflow, tool } from '@arcflow/core';
import { describe, expect, it } from 'vitest';
import { assertEventInvariants } from './invariants.ts';
import type { ScenarioRunner } from './scenarios.ts';
import { reply, scriptedProvider, toolCalls } from './scripted-provider.ts';

const ofKind = <K extends TraceEvent['kind']>(run: LocalRun, kind: K) => run.events.filter((event): event is Extract<TraceEvent, { kind: K }> => event.kind === kind);

/** A value no event or span may ever hold. */
const CANARY = 'canary-7f3a-state-value';

/** Appends its `item` to `facts`, sets `last` to it, and answers with what it saw of the state. */
const gather = tool({
  name: 'gather',
  description: 'Records a fact in the run state',
  input_schema: { type: 'object', properties: { item: { type: 'string' }, wait_ms: { type: 'integer' } }, required: ['item'] },
  handler: async ({ item, wait_ms }: { item: string; wait_ms?: number }, ctx) => {
    const seen = ctx.state.get('facts') ?? [];
    if (wait_ms) await new Promise((resolve) => setTimeout(resolve, wait_ms));
    ctx.state.append('facts', item);
    ctx.state.set('last', item);
    return `saw ${JSON.stringify(seen)}`;
  },
});

/** Writes `size` characters into the state under `blob`. */
const hoard = tool({
  name: 'hoard',
  description: 'Writes a large value into the state',
  input_schema: { type: 'object', properties: { size: { type: 'integer' } }, required: ['size'] },
  handler: ({ size }: { size: number }, ctx) => {
    ctx.state.set('blob', 'x'.repeat(size));
    return 'stored';
  },
});

/** Sets the key `item` to `size` x's, after `wait_ms`. */
const stash = tool({
  name: 'stash',
  description: 'Keeps a large value in the state under its own key',
  input_schema: { type: 'object', properties: { item: { type: 'string' }, size: { type: 'integer' }, wait_ms: { type: 'integer' } }, required: ['item', 'size'] },
  handler: async ({ item, size, wait_ms }: { item: string; size: number; wait_ms?: number }, ctx) => {
    ctx.state.set(item, 'x'.repeat(size));
    if (wait_ms) await new Promise((resolve) => setTimeout(resolve, wait_ms));
    return 'stored';
  },
});

/** Appends to a key that holds no array: the handler sees the error and answers with it. */
const misuse = tool({
  name: 'misuse',
  description: 'Appends to a non-array',
  input_schema: { type: 'object' },
  handler: (_args: unknown, ctx) => {
    try {
      ctx.state.append('last', 'x');
      return 'appended';
    } catch (error) {
      return `refused: ${(error as Error).message}`;
    }
  },
});

/** Deletes a key the state does not hold and sets `last` to what it holds: changes that change nothing. */
const tidy = tool({
  name: 'tidy',
  description: 'Changes nothing',
  input_schema: { type: 'object' },
  handler: (_args: unknown, ctx) => {
    ctx.state.delete('missing');
    ctx.state.set('last', ctx.state.get('last'));
    return 'tidied';
  },
});

/** Run state (SPEC §17): changes recorded with each call's result and applied at the join, in call order. */
export function defineStateScenarios(name: string, runner: ScenarioRunner): void {
  const run = async (...args: Parameters<ScenarioRunner>) => {
    const result = await runner(...args);
    assertEventInvariants(result.events);
    return result;
  };

  describe(`${name}: run state`, () => {
    it('applies three parallel calls’ changes in call order at the join; the next round and the record see them; no value reaches an event', async () => {
      const agent = new Agent({ name: 'gatherer', tools: [gather] });
      const model = scriptedProvider([
        // The first call finishes last: the order is the model's, not the finishing order.
        toolCalls([
          { name: 'gather', args: { item: `a-${CANARY}`, wait_ms: 60 } },
          { name: 'gather', args: { item: 'b', wait_ms: 20 } },
          { name: 'gather', args: { item: 'c' } },
        ]),
        toolCalls([{ name: 'gather', args: { item: 'd' } }]),
        reply('done'),
      ]);
      const result = await run(agent, 'gather', { provider: model, state: { facts: ['initial'] } });
      expect(result.status).toBe('completed');
      expect(result.state).toEqual({ facts: ['initial', `a-${CANARY}`, 'b', 'c', 'd'], last: 'd' });
      // Each call of round 1 saw the state as the round began; round 2 saw round 1's changes.
      const toolMessages = model.requests[2]!.messages.filter((message) => message.role === 'tool').map((message) => message.content);
      expect(toolMessages).toEqual(['saw ["initial"]', 'saw ["initial"]', 'saw ["initial"]', `saw ${JSON.stringify(['initial', `a-${CANARY}`, 'b', 'c'])}`]);
      expect(ofKind(result, 'StateUpdated').map(({ iteration, keys }) => ({ iteration, keys }))).toEqual([
        { iteration: 1, keys: ['facts', 'last'] },
        { iteration: 2, keys: ['facts', 'last'] },
      ]);
      expect(ofKind(result, 'StateUpdated').at(-1)?.state_size_bytes).toBe(Buffer.byteLength(JSON.stringify(result.state)));
      // The canary went into the state through a call's arguments; events hold names and sizes only.
      expect(JSON.stringify(result.events)).not.toContain(CANARY);
    });

    it('fails a call whose changes would take the state over max_state_bytes (state_too_large), applying nothing of it', async () => {
      const agent = new Agent({ name: 'hoarder', tools: [hoard, gather], max_state_bytes: 200 });
      const model = scriptedProvider([
        toolCalls([
          { name: 'hoard', args: { size: 500 } },
          { name: 'gather', args: { item: 'kept' } },
        ]),
        reply('done'),
      ]);
      const result = await run(agent, 'hoard', { provider: model });
      expect(result.status).toBe('completed');
      expect(result.state).toEqual({ facts: ['kept'], last: 'kept' });
      expect(ofKind(result, 'ToolCallFailed').map((event) => [event.tool_name, event.error_code])).toEqual([['hoard', 'state_too_large']]);
      expect(model.requests[1]!.messages.find((message) => message.role === 'tool')?.content).toBe("Error: the run's state is full");
    });

    it('holds max_state_bytes whatever the parallelism: of four parallel calls adding 400 bytes each under 1,000, those that end later fail', async () => {
      const agent = new Agent({ name: 'stasher', tools: [stash], max_state_bytes: 1_000 });
      // Each call fits alone; they end in the order d, c, b, a.
      const calls = ['a', 'b', 'c', 'd'].map((item, at) => ({ name: 'stash', args: { item, size: 400, wait_ms: 300 - at * 100 } }));
      const model = scriptedProvider([toolCalls(calls), reply('done')]);
      const result = await run(agent, 'stash', { provider: model });
      expect(result.status).toBe('completed');
      expect(Object.keys(result.state ?? {}).sort()).toEqual(['c', 'd']);
      expect(Buffer.byteLength(JSON.stringify(result.state))).toBeLessThanOrEqual(1_000);
      expect(ofKind(result, 'ToolCallFailed').map((event) => [event.tool_call_id, event.error_code])).toEqual([
        ['call_2', 'state_too_large'],
        ['call_1', 'state_too_large'],
      ]);
      const results = model.requests[1]!.messages.filter((message) => message.role === 'tool').map((message) => message.content);
      expect(results).toEqual(["Error: the run's state is full", "Error: the run's state is full", 'stored', 'stored']);
    });

    it("fails the later of two parallel workflow steps whose changes together would take the run's state over its limit", async () => {
      const workflow = new Workflow({
        name: 'stashing',
        steps: [
          { id: 'early', tool: stash, args: () => ({ item: 'early', size: 150_000, wait_ms: 50 }) },
          { id: 'late', tool: stash, args: () => ({ item: 'late', size: 150_000, wait_ms: 300 }) },
        ],
      });
      const result = await run(workflow, 'go', { provider: scriptedProvider([]) });
      expect(result.status).toBe('failed');
      expect(result.steps?.late).toMatchObject({ status: 'failed', error: { code: 'StepExecutionFailed', error_code: 'state_too_large' } });
      expect(result.steps?.early?.status).toBe('completed');
      expect(Object.keys(result.state ?? {})).toEqual(['early']);
    });

    it('throws to the handler an append to a key that holds no array; a run with no state has {} in its record and no StateUpdated', async () => {
      const agent = new Agent({ name: 'misuser', tools: [misuse] });
      const model = scriptedProvider([toolCalls([{ name: 'misuse', args: {} }]), reply('done')]);
      const result = await run(agent, 'misuse', { provider: model, state: { last: 'text' } });
      expect(model.requests[1]!.messages.find((message) => message.role === 'tool')?.content).toBe("refused: state 'last' holds a string, not an array: append needs an array");
      expect(result.state).toEqual({ last: 'text' });
      expect(ofKind(result, 'StateUpdated')).toEqual([]);
      const plain = await run(new Agent({ name: 'plain' }), 'hi', { provider: scriptedProvider([reply('hello')]) });
      expect(plain.state).toEqual({});
    });

    it('adds no StateUpdated for a round whose changes leave the state as it was; a later round that changes it names only what changed', async () => {
      const agent = new Agent({ name: 'tidier', tools: [tidy, gather] });
      const model = scriptedProvider([toolCalls([{ name: 'tidy', args: {} }]), toolCalls([{ name: 'gather', args: { item: 'new' } }]), reply('done')]);
      const result = await run(agent, 'tidy', { provider: model, state: { last: 'old', facts: [] } });
      expect(result.state).toEqual({ last: 'new', facts: ['new'] });
      expect(ofKind(result, 'StateUpdated').map(({ iteration, keys }) => ({ iteration, keys }))).toEqual([{ iteration: 2, keys: ['facts', 'last'] }]);
    });

    it('refuses an initial state that is not a JSON object, or is over max_state_bytes, naming state', async () => {
      const agent = new Agent({ name: 'limited', max_state_bytes: 64 });
      const provider = scriptedProvider([reply('never')]);
      await expect(runner(agent, 'x', { provider, state: [] as never })).rejects.toMatchObject({ code: 'invalid_request', message: 'state must be a JSON object, got an array' });
      await expect(runner(agent, 'x', { provider, state: { big: 'y'.repeat(100) } })).rejects.toMatchObject({
        code: 'invalid_request',
        message: "state is 110 bytes of JSON, over the agent's max_state_bytes (64)",
      });
      expect(provider.requests).toHaveLength(0);
      await expect(runner(agent, 'x', { provider, state: { '': 1 } })).rejects.toMatchObject({
        code: 'invalid_request',
        message: expect.stringContaining('a key that is the empty string'),
      });
    });

    it('takes an initial state as its JSON: keys JSON leaves out are not there, a Date is its string, and the size measured is the size kept', async () => {
      const peek = tool({
        name: 'state_peek',
        description: 'reports the state',
        input_schema: { type: 'object' },
        handler: (_args, ctx) => JSON.stringify({ keys: ctx.state.keys(), date: typeof ctx.state.get('d') }),
      });
      const agent = new Agent({ name: 'peeker', tools: [peek], max_state_bytes: 40 });
      const provider = scriptedProvider([toolCalls([{ name: 'state_peek', args: {} }]), (request) => reply(String(request.messages.at(-1)?.content))]);
      const state = { gone: undefined, also: () => 1, d: new Date(0) } as unknown as Record<string, unknown>;
      const result = await run(agent, 'x', { provider, state });
      expect(result.status).toBe('completed');
      expect(JSON.parse(result.output!)).toEqual({ keys: ['d'], date: 'string' });
    });

    it('starts a workflow step from the run state as it stood, and applies its changes when it completes', async () => {
      const first = new Agent({ name: 'first_gatherer', tools: [gather] });
      const second = new Agent({ name: 'second_gatherer', tools: [gather] });
      const workflow = new Workflow({
        name: 'gathering',
        steps: [
          { id: 'one', agent: first },
          { id: 'two', agent: second, depends_on: ['one'] },
        ],
      });
      const model = scriptedProvider([
        toolCalls([{ name: 'gather', args: { item: 'from one' } }]),
        reply('one done'),
        toolCalls([{ name: 'gather', args: { item: 'from two' } }]),
        reply('two done'),
      ]);
      const result = await run(workflow, 'go', { provider: model, state: { facts: [] } });
      expect(result.status).toBe('completed');
      expect(result.state).toEqual({ facts: ['from one', 'from two'], last: 'from two' });
      expect(model.requests[3]!.messages.filter((message) => message.role === 'tool').map((message) => message.content)).toEqual(['saw ["from one"]']);
    });
  });
}
