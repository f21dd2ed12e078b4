import { byteSize } from '../canonical.ts';
import type { Agent } from '../definitions/agent.ts';
import type { StepSettings } from '../definitions/settings.ts';
import type { RequestedToolCall } from '../vocabulary/messages.ts';
import type { ProviderResponse } from '../provider.ts';
import type { ToolDefinition } from '../tools/define.ts';
import { ToolResultText } from '../tools/result-text.ts';
import { type ParsedArguments, argumentsTooLarge, parseArguments } from './arguments.ts';
import { callSignature, countRepeats } from './loop-detection.ts';
import type { StepState } from './state.ts';

interface PlannedBase {
  /** Position in the model's list of calls. */
  readonly index: number;
  readonly call: RequestedToolCall;
  readonly signature: string;
}

/** A valid call to run. */
export interface ExecuteCall extends PlannedBase {
  readonly action: 'execute';
  readonly tool: ToolDefinition;
  readonly args: unknown;
  readonly input_size_bytes: number;
  /** The call waits for a person's approval before it runs (its tool's `needs_approval`). */
  readonly approval?: boolean;
}

/** A call answered at once, without running a handler: unknown tool or invalid arguments. */
export interface RejectCall extends PlannedBase {
  readonly action: 'reject';
  readonly content: string;
  readonly reason:
    | { readonly type: 'unknown_tool' }
    | { readonly type: 'invalid_arguments'; readonly tool: ToolDefinition; readonly violation: string; readonly input_size_bytes: number };
}

/** A repeated call answered with its previous result (loop detection, `inject`). */
export interface RepeatCall extends PlannedBase {
  readonly action: 'repeat';
  readonly repeats: number;
  readonly window: number;
}

export type PlannedCall = ExecuteCall | RejectCall | RepeatCall;

/** Plans one round of the response's tool calls in the model's order; `terminate` when loop detection says so. */
export function planToolRound(
  agent: Agent,
  state: StepState,
  settings: StepSettings,
  response: Pick<ProviderResponse, 'tool_calls' | 'oversize_arguments'>,
): { type: 'round'; calls: PlannedCall[] } | { type: 'terminate'; call: RepeatCall } {
  const detection = settings.loop_detection;
  const earlier = [...state.history];
  const planned: PlannedCall[] = [];
  for (const [index, call] of response.tool_calls.entries()) {
    const raw = call.function.arguments;
    const oversize = response.oversize_arguments?.[call.id];
    const parsed: ParsedArguments = oversize === undefined ? parseArguments(raw) : { ok: false, violation: argumentsTooLarge(oversize) };
    // Without loop detection no signature is ever compared (and the history keeps none).
    // Arguments too large to keep are known by their size: two calls sending the same payload repeat, two of different sizes do not.
    const signature = detection ? callSignature(call.function.name, parsed, oversize === undefined ? raw : `\u0000oversize ${oversize} bytes`) : '';
    const repeats = detection ? countRepeats(earlier, signature, detection) : 1;
    earlier.push(signature);
    if (detection && repeats >= detection.threshold) {
      const repeat: RepeatCall = { action: 'repeat', index, call, signature, repeats, window: detection.window };
      if (detection.action === 'terminate') return { type: 'terminate', call: repeat };
      planned.push(repeat);
      continue;
    }
    planned.push(planCall(agent.findTool(call.function.name), index, call, signature, parsed, oversize ?? byteSize(raw)));
  }
  return { type: 'round', calls: planned };
}

/** One call planned: rejected (unknown tool, arguments that fail the schema) or ready to execute. */
export function planCall(
  tool: ToolDefinition | undefined,
  index: number,
  call: RequestedToolCall,
  signature: string,
  parsed: ParsedArguments,
  input_size_bytes: number,
): ExecuteCall | RejectCall {
  if (!tool) {
    return { action: 'reject', index, call, signature, content: ToolResultText.unknownTool(call.function.name), reason: { type: 'unknown_tool' } };
  }
  const violation = parsed.ok ? tool.check(parsed.value) : parsed.violation;
  if (violation !== undefined) {
    return {
      action: 'reject',
      index,
      call,
      signature,
      content: ToolResultText.invalidArguments(violation),
      reason: { type: 'invalid_arguments', tool, violation, input_size_bytes },
    };
  }
  return { action: 'execute', index, call, signature, tool, args: (parsed as { value: unknown }).value, input_size_bytes };
}
