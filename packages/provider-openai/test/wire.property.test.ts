import { Agent, runLocal, tool } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { type FakeOpenAIServer, type FakeTurn, assertEventInvariants, startFakeOpenAI } from '@arcflow/testing';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const CANARY = 'CANARYwire';

let server: FakeOpenAIServer;
beforeAll(async () => {
  server = await startFakeOpenAI({ fallback: () => ({ type: 'text', content: 'done' }) });
});
afterAll(() => server.close());

const echo = tool({
  name: 'echo',
  description: 'echo',
  input_schema: { type: 'object', properties: { n: { type: 'integer' } } },
  handler: (args: unknown) => `${CANARY} ${JSON.stringify(args)}`,
});
const agent = new Agent({ name: 'wire_fuzzed', tools: [echo], loop_detection: false, tool_execution: { max_iterations: 4 } });

/** Any JSON value, or a value where the wire format wants a particular type. */
const junk = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom('', 'echo', `${CANARY}x`, -1, 1e308, 'a\u0000b'));
/** The same for what events record by design, bounded: names, ids, `finish_reason`, `model`. Anything but the canary. */
const recordedJunk = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom('', -1, 1e308, 'a\u0000b', 'x'.repeat(500)));
const call = fc.record(
  {
    id: recordedJunk,
    type: fc.oneof(fc.constant('function'), junk),
    function: fc.oneof(
      fc.record({ name: fc.oneof(fc.constant('echo'), recordedJunk), arguments: fc.oneof(fc.constant('{"n": 1}'), fc.constant(`{"${CANARY}": 1}`), junk) }, { requiredKeys: [] }),
      junk,
    ),
  },
  { requiredKeys: [] },
);
const message = fc.record(
  {
    role: fc.oneof(fc.constant('assistant'), junk),
    content: fc.oneof(fc.constant(null), fc.constant(`${CANARY} text`), fc.array(fc.record({ type: fc.constantFrom('text', 'image_url'), text: junk })), junk),
    refusal: fc.oneof(fc.constant(null), fc.constant(`${CANARY} refusal`), junk),
    tool_calls: fc.oneof(fc.array(call, { maxLength: 4 }), junk),
  },
  { requiredKeys: [] },
);
const body = fc.record(
  {
    id: junk,
    model: recordedJunk,
    choices: fc.oneof(fc.array(fc.record({ index: junk, message: fc.oneof(message, junk), finish_reason: recordedJunk }, { requiredKeys: [] }), { maxLength: 2 }), junk),
    usage: fc.oneof(fc.record({ prompt_tokens: junk, completion_tokens: junk, total_tokens: junk }, { requiredKeys: [] }), junk),
  },
  { requiredKeys: [] },
);
const turn: fc.Arbitrary<FakeTurn> = fc.oneof(
  { weight: 8, arbitrary: body.map((value) => ({ type: 'status' as const, status: 200, body: value })) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }).map((value) => ({ type: 'status' as const, status: 200, body: value })) },
  { weight: 1, arbitrary: fc.constantFrom(400, 404, 500, 503).map((status) => ({ type: 'status' as const, status })) },
  { weight: 1, arbitrary: fc.constant({ type: 'malformed' as const }) },
);

describe('any chat-completions body over HTTP (property)', () => {
  it('ends the run with every call ended once, and keeps values, text and prompts out of every event', async () => {
    const provider = openaiProvider({ base_url: server.url, api_key: 'k', model: 'fuzz', timeout_ms: 2_000 });
    await fc.assert(
      fc.asyncProperty(fc.array(turn, { minLength: 1, maxLength: 4 }), async (turns) => {
        server.reset(turns);
        const run = await runLocal(agent, `${CANARY} input`, { provider, logger: false, provider_retry: { attempts: 2, backoff_ms: 1, max_backoff_ms: 2 } });
        expect(['completed', 'failed']).toContain(run.status);
        expect(run.events.at(-1)?.kind).toMatch(/^Run(Completed|Failed)$/);
        assertEventInvariants(run.events);
        expect(JSON.stringify(run.events)).not.toContain(CANARY);
        if (run.status === 'failed') expect(run.error?.code).toMatch(/^(ProviderError|StepExecutionFailed)$/);
      }),
      { numRuns: 150 },
    );
  });
});
