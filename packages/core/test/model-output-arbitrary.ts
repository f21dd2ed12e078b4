import { Agent, type ProviderResponse, type RunRecord, type TraceEvent, tool } from '@arcflow/core';
import { assertEventInvariants } from '@arcflow/testing';
import fc from 'fast-check';
import { expect } from 'vitest';

// Model turns of any shape, for the property tests of every runner: the local runner's and the
// queue engine's.

/** Put where values go (arguments, text): it must never reach an event. */
const CANARY = 'CANARYvalue';
const TOOL_TERMINALS = new Set(['ToolCallCompleted', 'ToolCallFailed', 'ToolInputValidationFailed', 'LoopDetected']);

const echo = tool({
  name: 'echo',
  description: 'echo',
  input_schema: { type: 'object', properties: { n: { type: 'integer' } }, additionalProperties: { type: 'integer' } },
  handler: (args: unknown) => `${CANARY} ${JSON.stringify(args)}`,
});
/** The agent the fuzzed turns are answered by: one tool that echoes the canary back as its result. */
export const fuzzedAgent = new Agent({ name: 'fuzzed', tools: [echo], loop_detection: false });

/**
 * Anything a model could put where a name, id or count goes: control characters, huge text,
 * odd numbers, wrong types. (Names may be recorded; the canary goes where values go.)
 */
const junk = fc.oneof(
  fc.string({ maxLength: 80 }),
  fc.constantFrom('echo', 'x:y', 'x_y', 'call_1', '', 'id\ud800x', '\u001b[31m', 'a\nb', 'e'.repeat(300)),
  fc.double(),
  fc.integer(),
  fc.constantFrom(null, undefined, true, [], {}),
);
/** Argument text: valid JSON with input-chosen keys, huge or non-finite numbers, or garbage. */
const argumentsText = fc.oneof(
  fc
    .dictionary(
      fc.string({ maxLength: 12 }).map((key) => `${CANARY}${key}`),
      fc.oneof(fc.integer(), fc.string({ maxLength: 8 })),
    )
    .map((value) => JSON.stringify(value)),
  fc.constantFrom('{"n": 1e400}', '{"n": 2.5}', '{"n": -0}', '[[[[[[', 'not json', '', '{"n": 1}', `{"${CANARY}_ssn": "x"}`),
  fc.string({ maxLength: 40 }).map((text) => `${CANARY}${text}`),
);
const call = fc.record(
  { id: junk, type: fc.constant('function'), function: fc.record({ name: fc.oneof(fc.constant('echo'), junk), arguments: fc.oneof(argumentsText, junk) }) },
  { requiredKeys: [] },
);
const usage = fc.record({ input: junk, output: junk, total: junk }, { requiredKeys: [] });
const response = fc.record({
  content: fc.oneof(
    fc.constant(null),
    fc.string({ maxLength: 20 }).map((text) => `${CANARY}${text}`),
  ),
  tool_calls: fc.array(call, { minLength: 1, maxLength: 6 }),
  finish_reason: junk,
  model: junk,
  usage,
});

/** One to three such turns (the runner is then given a text answer). */
export const modelTurns = fc.array(response, { minLength: 1, maxLength: 3 }).map((turns) => turns as unknown as ProviderResponse[]);

/** What must hold of a run whatever its model sent: it ended, every call ended once, no value or control character in any event. */
export function expectRunSurvived(run: RunRecord & { readonly events: readonly TraceEvent[] }): void {
  expect(['completed', 'failed']).toContain(run.status);
  assertEventInvariants(run.events);
  expect(run.events.at(-1)?.kind).toMatch(/^Run(Completed|Failed)$/);
  const text = JSON.stringify(run.events);
  expect(text).not.toContain(CANARY);
  expect(text).not.toMatch(/[\u0000-\u001f]/);
  // Every call the model's turns asked for that the loop acted on has exactly one terminal event.
  const terminals = run.events.filter((event) => TOOL_TERMINALS.has(event.kind));
  const started = new Set(run.events.filter((event) => 'tool_call_id' in event).map((event) => `${event.iteration}/${(event as { tool_call_id: string }).tool_call_id}`));
  expect(terminals).toHaveLength(started.size);
  for (const event of run.events) {
    if ('tokens' in event) for (const count of Object.values(event.tokens)) expect(Number.isSafeInteger(count) && count >= 0).toBe(true);
  }
}
