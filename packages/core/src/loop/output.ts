import type { ResolvedOutput } from '../definitions/output-schema.ts';
import type { StepSettings } from '../definitions/settings.ts';
import { ErrorCode } from '../errors.ts';
import type { EventDraft } from '../events/types.ts';
import { jsonProblem } from '../json-limits.ts';
import { addTokens } from '../vocabulary/tokens.ts';
import type { ProviderResponse } from '../provider.ts';
import { MAX_ARGUMENT_DEPTH } from './arguments.ts';
import { type StepState, withNotes } from './state.ts';

/** A text answer, decided: the step's output (with its parsed value under an output schema), another call to repair it, or a failure. */
export type AnswerDecision =
  | { readonly type: 'complete'; readonly output: string; readonly output_json?: unknown }
  | { readonly type: 'repair_output'; readonly violation_description: string; readonly events: EventDraft[] }
  | { readonly type: 'fail'; readonly error_code: string; readonly message: string; readonly events: EventDraft[] };

/** What the model is told about an answer that failed the output schema (SPEC §11), before it is asked again. */
export function invalidOutputMessage(violation: string): string {
  return `Error: invalid output — ${violation}`;
}

/** The violation for an answer whose text does not parse. */
export const OUTPUT_NOT_JSON = 'output is not valid JSON';

/** An answer checked against the output schema: its parsed value, or the violation (path-only, never the value). */
export type OutputCheck = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly violation: string };

/**
 * Parses and validates an answer. A value that would not survive a JSON round trip (a number such
 * as `1e400`, nesting deeper than tool arguments may) is refused like a schema violation, so the
 * record's `output_json` is exactly what the text says.
 */
export function checkOutput(output: ResolvedOutput, text: string): OutputCheck {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, violation: OUTPUT_NOT_JSON };
  }
  const problem = jsonProblem(value, MAX_ARGUMENT_DEPTH);
  if (problem !== undefined) return { ok: false, violation: `output ${problem}` };
  const violation = output.check(value);
  return violation === undefined ? { ok: true, value } : { ok: false, violation };
}

/**
 * Decides a text answer to call `state.iterations + 1`. Without an output schema it is the step's
 * output. With one, it must parse and validate; if not, `OutputValidationFailed`, and the model is
 * asked again while the step's `output_retries` last and a call is left: a repair is an iteration
 * like any other (none left: `max_iterations_exceeded`), and none follows the final-answer call.
 */
export function decideAnswer(state: StepState, settings: StepSettings, text: string): AnswerDecision {
  const output = settings.output;
  if (!output) return { type: 'complete', output: text };
  const checked = checkOutput(output, text);
  if (checked.ok) return { type: 'complete', output: text, output_json: checked.value };
  const iteration = state.iterations + 1;
  const { violation } = checked;
  const events: EventDraft[] = [{ kind: 'OutputValidationFailed', step_id: state.step_id, iteration, violation_description: violation }];
  const rejections = (state.output_rejections ?? 0) + 1;
  const step = `step '${state.step_id}'`;
  if (rejections > output.retries || state.tools_disabled) {
    return { type: 'fail', error_code: ErrorCode.InvalidOutput, message: `${step} gave no valid output in ${rejections} answers (last: ${violation})`, events };
  }
  if (iteration >= settings.max_iterations) {
    const message = `${step} used all ${settings.max_iterations} iterations and the model's output is still invalid (${violation})`;
    return { type: 'fail', error_code: ErrorCode.MaxIterationsExceeded, message, events };
  }
  return { type: 'repair_output', violation_description: violation, events };
}

/**
 * A step's fixed output (test mode's `output`): checked like an answer, with no model to ask again,
 * so an output that fails the schema fails the step (`invalid_output`).
 */
export function decideFixedOutput(step_id: string, settings: StepSettings, text: string): Exclude<AnswerDecision, { type: 'repair_output' }> {
  if (!settings.output) return { type: 'complete', output: text };
  const checked = checkOutput(settings.output, text);
  if (checked.ok) return { type: 'complete', output: text, output_json: checked.value };
  return {
    type: 'fail',
    error_code: ErrorCode.InvalidOutput,
    message: `step '${step_id}': its test-mode output fails the output schema (${checked.violation})`,
    events: [{ kind: 'OutputValidationFailed', step_id, violation_description: checked.violation }],
  };
}

/** The state before a repair call: the rejected answer, then the user message that says what is wrong with it. */
export function applyOutputRepair(state: StepState, response: ProviderResponse, violation: string): StepState {
  return {
    ...state,
    iterations: state.iterations + 1,
    usage: addTokens(state.usage, response.usage),
    messages: [...state.messages, { role: 'assistant', content: response.content }, { role: 'user', content: invalidOutputMessage(violation) }],
    output_rejections: (state.output_rejections ?? 0) + 1,
    notes: withNotes(state, 2),
  };
}
