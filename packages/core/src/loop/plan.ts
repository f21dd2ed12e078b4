import { byteSize } from '../canonical.ts';
import type { Agent } from '../definitions/agent.ts';
import { MAX_ARGUMENT_BYTES } from '../defaults.ts';
import type { StepSettings } from '../definitions/settings.ts';
import type { RequestedToolCall } from '../provider.ts';
import type { ToolDefinition } from '../tools/define.ts';
import { ToolResultText } from '../tools/result-text.ts';
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

/** Plans one round of tool calls in the model's order; `terminate` when loop detection says so. */
export function planToolRound(
  agent: Agent,
  state: StepState,
  settings: StepSettings,
  calls: readonly RequestedToolCall[],
): { type: 'round'; calls: PlannedCall[] } | { type: 'terminate'; call: RepeatCall } {
  const detection = settings.loop_detection;
  const earlier = [...state.history];
  const planned: PlannedCall[] = [];
  for (const [index, call] of calls.entries()) {
    const raw = call.function.arguments;
    const parsed = parseArguments(raw);
    // Without loop detection no signature is ever compared (and the history keeps none).
    const signature = detection ? callSignature(call.function.name, parsed) : '';
    const repeats = detection ? countRepeats(earlier, signature, detection) : 1;
    earlier.push(signature);
    if (detection && repeats >= detection.threshold) {
      const repeat: RepeatCall = { action: 'repeat', index, call, signature, repeats, window: detection.window };
      if (detection.action === 'terminate') return { type: 'terminate', call: repeat };
      planned.push(repeat);
      continue;
    }
    planned.push(planOne(agent, index, call, signature, parsed, raw));
  }
  return { type: 'round', calls: planned };
}

function planOne(
  agent: Agent,
  index: number,
  call: RequestedToolCall,
  signature: string,
  parsed: ReturnType<typeof parseArguments>,
  raw: string,
): PlannedCall {
  const tool = agent.findTool(call.function.name);
  if (!tool) {
    return { action: 'reject', index, call, signature, content: ToolResultText.unknownTool(call.function.name), reason: { type: 'unknown_tool' } };
  }
  const input_size_bytes = byteSize(raw);
  if (input_size_bytes > MAX_ARGUMENT_BYTES) {
    const violation = `arguments are too large (${input_size_bytes} bytes; the limit is ${MAX_ARGUMENT_BYTES})`;
    return { action: 'reject', index, call, signature, content: ToolResultText.invalidArguments(violation), reason: { type: 'invalid_arguments', tool, violation, input_size_bytes } };
  }
  const violation = parsed.ok ? tool.check(parsed.value) : undefined;
  if (!parsed.ok || violation !== undefined) {
    return {
      action: 'reject',
      index,
      call,
      signature,
      content: parsed.ok ? ToolResultText.invalidArguments(violation ?? '') : ToolResultText.argumentsNotJson(),
      reason: { type: 'invalid_arguments', tool, violation: violation ?? 'arguments are not valid JSON', input_size_bytes },
    };
  }
  return { action: 'execute', index, call, signature, tool, args: parsed.value, input_size_bytes };
}

/** Parses a call's raw argument text; empty text means no arguments. */
export function parseArguments(raw: string): { ok: true; value: unknown } | { ok: false; raw: string } {
  if (raw.trim() === '') return { ok: true, value: {} };
  try {
    return { ok: true, value: JSON.parse(raw) };
  } catch {
    return { ok: false, raw };
  }
}
