import { type RunInput, inputMessages } from '../conversation/messages.ts';
import type { Agent } from '../definitions/agent.ts';
import { type Tokens, ZERO_TOKENS } from '../vocabulary/tokens.ts';
import type { ChatMessage } from '../vocabulary/messages.ts';

/**
 * Everything the loop knows about a step between two provider calls. Plain JSON, so the engine
 * can store it in Redis and any worker can resume it.
 */
export interface StepState {
  readonly step_id: string;
  /** Provider calls whose responses have been consumed. */
  readonly iterations: number;
  readonly messages: readonly ChatMessage[];
  readonly usage: Tokens;
  /** Signatures of the step's tool calls, oldest first (for loop detection). */
  readonly history: readonly string[];
  /** The last result per signature still inside the detection window. */
  readonly last_results: Readonly<Record<string, string>>;
  /** True when the next call is the final-answer call, with tools disabled. */
  readonly tools_disabled: boolean;
  /** Answers that failed the output schema so far (SPEC §11); absent until the first. */
  readonly output_rejections?: number;
  /**
   * Where the thread's conversation that the step began on sits among its messages (SPEC §11):
   * `count` messages from `at`. Absent when it began on none. A store may keep those messages once,
   * with the thread, instead of in every run's transcript.
   */
  readonly earlier?: { readonly at: number; readonly count: number };
  /**
   * How many recorded changes of the run's state (SPEC §17) this state has seen: a store keeps the
   * state as a list of them (the initial state, then each round that changed it). Absent: none.
   */
  readonly state_entries?: number;
  /**
   * Where arcflow's own notes sit among the messages (indexes, ascending): the final-answer request
   * and the rejected answers with their `Error: invalid output` turns. They go to the model within
   * the step, never onto a thread (SPEC §11). Absent: none.
   */
  readonly notes?: readonly number[];
}

/** The state's notes with the next `count` messages added after its last one. */
export function withNotes(state: StepState, count: number): readonly number[] {
  const from = state.messages.length;
  return [...(state.notes ?? []), ...Array.from({ length: count }, (_, offset) => from + offset)];
}

/**
 * The state of a step before its first provider call: the agent's instructions as a system
 * message, then `earlier` (a thread's conversation so far, SPEC §11), then the input's messages.
 */
export function initialStepState(agent: Agent, input: RunInput, step_id: string, earlier: readonly ChatMessage[] = []): StepState {
  const system = [agent.role && `You are ${agent.role}.`, agent.instructions].filter(Boolean).join('\n\n');
  const messages: ChatMessage[] = [];
  if (system) messages.push({ role: 'system', content: system });
  const at = messages.length;
  messages.push(...earlier, ...inputMessages(input));
  return {
    step_id,
    iterations: 0,
    messages,
    usage: ZERO_TOKENS,
    history: [],
    last_results: {},
    tools_disabled: false,
    ...(earlier.length > 0 ? { earlier: { at, count: earlier.length } } : {}),
  };
}
