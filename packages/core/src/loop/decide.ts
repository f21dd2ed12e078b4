import { byteSize } from '../canonical.ts';
import type { Agent } from '../definitions/agent.ts';
import { settingsForCall } from '../definitions/model-settings.ts';
import { responseFormatFor } from '../definitions/output-schema.ts';
import type { StepSettings } from '../definitions/settings.ts';
import { ErrorCode } from '../errors.ts';
import type { EventDraft } from '../events/types.ts';
import type { ChatMessage } from '../vocabulary/messages.ts';
import { type RunSpent, NOTHING_SPENT, addTokens } from '../vocabulary/tokens.ts';
import type { ProviderRequest, ProviderResponse } from '../provider.ts';
import { ToolResultText } from '../tools/result-text.ts';
import { decideAnswer } from './output.ts';
import { type PlannedCall, planToolRound } from './plan.ts';
import { type StepState, withNotes } from './state.ts';

/** What follows a provider response. This is the one place the loop decides. */
export type ResponseDecision =
  /**
   * `output_json`: the parsed answer, under an output schema (SPEC §11). `closed`: the final-answer
   * call's answer came with calls too, which are not executed (see {@link unexecutedCalls}).
   */
  | { readonly type: 'complete'; readonly output: string; readonly output_json?: unknown; readonly closed?: EventDraft[] }
  | { readonly type: 'fail'; readonly error_code: string; readonly message: string; readonly events: EventDraft[] }
  /** `closed`: the response's calls, not executed (see {@link unexecutedCalls}). */
  | { readonly type: 'final_answer'; readonly closed: EventDraft[] }
  /** The answer failed the output schema: the model is told so and asked again (`applyOutputRepair`). */
  | { readonly type: 'repair_output'; readonly violation_description: string; readonly events: EventDraft[] }
  | { readonly type: 'tools'; readonly calls: readonly PlannedCall[] };

/** The note that precedes the final-answer call, when the tool budget is spent. */
export const FINAL_ANSWER_NOTE = 'The tool budget for this task is spent: no more tools can be called. Answer now with what you have.';

/** The request for the step's next provider call. */
export function buildRequest(agent: Agent, state: StepState, settings: StepSettings, defaultModel: string): ProviderRequest {
  const tools = state.tools_disabled ? [] : agent.tools.map((tool) => ({ name: tool.name, description: tool.description, parameters: tool.input_schema }));
  const callSettings = settingsForCall(settings.model_settings, { first: state.iterations === 0, hasTools: tools.length > 0 });
  return {
    model: settings.model ?? defaultModel,
    messages: state.messages,
    tools,
    ...(Object.keys(callSettings).length > 0 ? { settings: callSettings } : {}),
    ...(settings.output ? { response_format: responseFormatFor(agent.name, settings.output) } : {}),
  };
}

/** Each message's JSON size, once per message object: a step's messages carry over from call to call. */
const messageSizes = new WeakMap<ChatMessage, number>();

/**
 * The byte size of `JSON.stringify(messages)`, from each message's own (remembered) size, so a
 * long conversation is not serialised again at every call (SPEC §11: the transcript is append-only).
 */
export function messagesByteSize(messages: readonly ChatMessage[]): number {
  let total = messages.length > 0 ? 1 + messages.length : 2;
  for (const message of messages) {
    let size = messageSizes.get(message);
    if (size === undefined) {
      size = byteSize(JSON.stringify(message));
      messageSizes.set(message, size);
    }
    total += size;
  }
  return total;
}

/** A request's prompt size in bytes: its messages' and tools' JSON (what a worst case counts as input tokens). */
export function promptBytes(request: Pick<ProviderRequest, 'messages' | 'tools'>): number {
  return messagesByteSize(request.messages) + (request.tools.length > 0 ? byteSize(JSON.stringify(request.tools)) : 0);
}

/** `ProviderRequestSent` for a request, sized without recording its content. */
export function requestSentEvent(step_id: string, iteration: number, provider_id: string, request: ProviderRequest): EventDraft {
  return {
    kind: 'ProviderRequestSent',
    step_id,
    iteration,
    provider_id,
    model_id: request.model,
    prompt_size_bytes: messagesByteSize(request.messages),
    tools_count: request.tools.length,
  };
}

/** `ProviderResponseReceived` and `TokensConsumed` for a response. */
export function responseEvents(
  state: StepState,
  provider_id: string,
  model_id: string,
  response: ProviderResponse,
  latency_ms: number,
  cost?: { readonly cost_usd: number; readonly cumulative_cost_usd: number },
): EventDraft[] {
  const place = { step_id: state.step_id, iteration: state.iterations + 1 };
  return [
    {
      kind: 'ProviderResponseReceived',
      ...place,
      provider_id,
      model_id: response.model ?? model_id,
      tokens: response.usage,
      latency_ms,
      finish_reason: response.finish_reason,
      tool_calls_count: response.tool_calls.length,
    },
    { kind: 'TokensConsumed', ...place, tokens: response.usage, cumulative: addTokens(state.usage, response.usage), ...(cost ?? {}) },
  ];
}

/**
 * The events a decision adds with its response, before what follows it: a rejected answer's
 * `OutputValidationFailed`, or the terminal events of calls it does not execute. (A failure's
 * events go with the step's end.)
 */
export function decidedEvents(decision: ResponseDecision): readonly EventDraft[] {
  if (decision.type === 'repair_output') return decision.events;
  if (decision.type === 'final_answer') return decision.closed;
  return decision.type === 'complete' ? (decision.closed ?? []) : [];
}

/** Calls of a decision that will be executed (what a budget's `max_tool_calls` counts). */
export function executedCalls(decision: ResponseDecision): number {
  return decision.type === 'tools' ? decision.calls.filter((planned) => planned.action === 'execute').length : 0;
}

/**
 * Decides what follows `response`, the answer to call number `state.iterations + 1`, given what
 * the run had spent before it (for the budget).
 */
export function decideResponse(agent: Agent, state: StepState, settings: StepSettings, response: ProviderResponse, spent: RunSpent = NOTHING_SPENT): ResponseDecision {
  const iteration = state.iterations + 1;
  if (response.tool_calls.length === 0) {
    const answer = decideAnswer(state, settings, response.content ?? '');
    if (answer.type !== 'repair_output') return answer;
    // A repair is one more call: not past the run's token budget.
    const over = overBudget(settings, spent, response, 0);
    return over ? stepFailure(ErrorCode.BudgetExceeded, `step '${state.step_id}' stopped: ${over}`, answer.events) : answer;
  }
  // Calls the loop stops before executing still end, each in one terminal event (SPEC §4).
  const closed = (except?: string) => unexecutedCalls(state, response, except);
  if (state.tools_disabled) {
    // The final-answer call, made without tools: its text is the answer even beside calls it should
    // not have made (a text answer is never discarded); without text, the step fails for what
    // disabled the tools — its iterations, or (an earlier call) its budget.
    if ((response.content ?? '') !== '') {
      const answer = decideAnswer(state, settings, response.content!);
      if (answer.type === 'complete') return { ...answer, closed: closed() };
      return answer.type === 'fail' ? { ...answer, events: [...answer.events, ...closed()] } : answer;
    }
    if (iteration <= settings.max_iterations) {
      return stepFailure(ErrorCode.BudgetExceeded, `step '${state.step_id}' stopped: its budget was spent, and the model asked for tools again instead of answering`, closed());
    }
    return stepFailure(ErrorCode.MaxIterationsExceeded, `step '${state.step_id}' used all ${settings.max_iterations} iterations and the model still asked for tools`, closed());
  }
  if (iteration >= settings.max_iterations) {
    if (settings.on_max_iterations === 'final_answer') return { type: 'final_answer', closed: closed() };
    return stepFailure(ErrorCode.MaxIterationsExceeded, `step '${state.step_id}' used all ${settings.max_iterations} iterations and the model still asked for tools`, closed());
  }
  const round = planToolRound(agent, state, settings, response);
  if (round.type === 'round') {
    const decision: ResponseDecision = { type: 'tools', calls: round.calls };
    const over = overBudget(settings, spent, response, executedCalls(decision));
    if (!over) return decision;
    if (settings.budget?.on_exceeded === 'final_answer') return { type: 'final_answer', closed: closed() };
    return stepFailure(ErrorCode.BudgetExceeded, `step '${state.step_id}' stopped: ${over}`, closed());
  }
  const { call, repeats, window } = round.call;
  const event: EventDraft = {
    kind: 'LoopDetected',
    step_id: state.step_id,
    iteration,
    tool_name: call.function.name,
    tool_call_id: call.id,
    repeats,
    window,
    action: 'terminate',
  };
  return stepFailure(
    ErrorCode.LoopDetected,
    `step '${state.step_id}' stopped: tool '${call.function.name}' was called ${repeats} times with the same arguments within the last ${window} calls`,
    [event, ...closed(call.id)],
  );
}

/**
 * `ToolCallFailed` (`cancelled`, nothing run) for each call of a response that the loop stops
 * before executing: past `max_iterations`, over a budget, beside a repeat that terminates the step,
 * or asked for by the final-answer call (`except`: the repeat, whose `LoopDetected` ends it). Each
 * call of a response ends in exactly one terminal event.
 */
function unexecutedCalls(state: StepState, response: ProviderResponse, except?: string): EventDraft[] {
  const iteration = state.iterations + 1;
  return response.tool_calls
    .filter((call) => call.id !== except)
    .map((call) => ({
      kind: 'ToolCallFailed',
      step_id: state.step_id,
      iteration,
      tool_name: call.function.name,
      tool_call_id: call.id,
      duration_ms: 0,
      error_code: ErrorCode.Cancelled,
    }));
}

/**
 * What a response would take the run over, if anything: its tokens over `max_total_tokens`, or
 * the calls it asks to execute over `max_tool_calls` (strictly over; reaching a cap is allowed).
 */
function overBudget(settings: StepSettings, spent: RunSpent, response: ProviderResponse, executing: number): string | undefined {
  const budget = settings.budget;
  if (!budget) return undefined;
  const tokens = spent.tokens + response.usage.total;
  if (budget.max_total_tokens !== undefined && tokens > budget.max_total_tokens) {
    return `the run has used ${tokens} tokens; its budget is ${budget.max_total_tokens}`;
  }
  const calls = spent.tool_calls + executing;
  if (budget.max_tool_calls !== undefined && calls > budget.max_tool_calls) {
    return `the run would make ${calls} tool calls; its budget is ${budget.max_tool_calls}`;
  }
  return undefined;
}

function stepFailure(error_code: string, message: string, events: EventDraft[] = []): ResponseDecision {
  return { type: 'fail', error_code, message, events };
}

/**
 * The state after a round: the model's turn, then one tool message per call in the model's
 * order (whatever order they finished in). `contents[i]` is the result of call i; repeated calls
 * take the latest earlier result with the same signature.
 */
export function applyToolRound(
  state: StepState,
  settings: StepSettings,
  response: ProviderResponse,
  calls: readonly PlannedCall[],
  contents: ReadonlyMap<number, string>,
): StepState {
  const last_results: Record<string, string> = { ...state.last_results };
  const toolMessages: ChatMessage[] = [];
  for (const planned of calls) {
    const content = planned.action === 'repeat' ? ToolResultText.repeated(last_results[planned.signature] ?? '(no result recorded)') : contents.get(planned.index);
    if (content === undefined) throw new Error(`no result for tool call ${planned.call.id}`);
    if (planned.action !== 'repeat') last_results[planned.signature] = content;
    toolMessages.push({ role: 'tool', tool_call_id: planned.call.id, content });
  }
  const history = [...state.history, ...calls.map((planned) => planned.signature)];
  const window = settings.loop_detection ? settings.loop_detection.window : 0;
  const kept = new Set(history.slice(Math.max(0, history.length - window)));
  return {
    ...state,
    iterations: state.iterations + 1,
    usage: addTokens(state.usage, response.usage),
    messages: [...state.messages, { role: 'assistant', content: response.content, tool_calls: response.tool_calls }, ...toolMessages],
    history: history.slice(Math.max(0, history.length - window)),
    last_results: Object.fromEntries(Object.entries(last_results).filter(([signature]) => kept.has(signature))),
  };
}

/** The state before the final-answer call: the calls are dropped, a note is added, tools go off. */
export function applyFinalAnswerNote(state: StepState, response: ProviderResponse): StepState {
  return {
    ...state,
    iterations: state.iterations + 1,
    usage: addTokens(state.usage, response.usage),
    messages: [...state.messages, { role: 'user', content: FINAL_ANSWER_NOTE }],
    notes: withNotes(state, 1),
    tools_disabled: true,
  };
}

/** Usage including a response not folded into the state (a step that ends on it). */
export function usageWith(state: StepState, response: ProviderResponse) {
  return addTokens(state.usage, response.usage);
}
