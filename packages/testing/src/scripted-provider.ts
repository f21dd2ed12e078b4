import { type ModelProvider, ProviderFailure, type ProviderRequest, type ProviderResponse, type Tokens } from '@arcflow/core';

/** One scripted model turn: a response, a failure to throw, or a function of the request. */
export type ScriptedTurn = ProviderResponse | ProviderFailure | ((request: ProviderRequest) => ProviderResponse | Promise<ProviderResponse>);

export interface ScriptedProvider extends ModelProvider {
  /** Every request the provider received, in order. */
  readonly requests: ProviderRequest[];
}

const DEFAULT_USAGE: Tokens = { input: 10, output: 5, total: 15 };

/**
 * A provider that answers from a script, one turn per call, and records the requests. With
 * `repeat`, the last turn answers every call past the end of the script.
 */
export function scriptedProvider(turns: readonly ScriptedTurn[], options: { id?: string; delay_ms?: number; repeat?: boolean; model?: string } = {}): ScriptedProvider {
  const requests: ProviderRequest[] = [];
  return {
    id: options.id ?? 'scripted',
    defaultModel: options.model ?? 'scripted-model',
    requests,
    async complete(request) {
      const index = requests.length;
      requests.push(structuredClone(request));
      if (options.delay_ms) await new Promise((resolve) => setTimeout(resolve, options.delay_ms));
      const turn = turns[index] ?? (options.repeat ? turns.at(-1) : undefined);
      if (turn === undefined) throw new ProviderFailure('test_responses_exhausted', `scripted provider has no turn ${index + 1}`, { retryable: false });
      if (turn instanceof ProviderFailure) throw turn;
      return typeof turn === 'function' ? turn(request) : turn;
    },
  };
}

/** A text answer. */
export function reply(text: string, usage: Tokens = DEFAULT_USAGE): ProviderResponse {
  return { content: text, tool_calls: [], finish_reason: 'stop', usage };
}

/** A turn asking for one tool call. Arguments that are a string are sent as raw text. */
export function toolCall(name: string, args: unknown, id = `call_${name}_${Math.random().toString(36).slice(2, 8)}`): ProviderResponse {
  return toolCalls([{ name, args, id }]);
}

/** A turn asking for several tool calls at once, in this order. */
export function toolCalls(calls: readonly { name: string; args: unknown; id?: string }[], usage: Tokens = DEFAULT_USAGE): ProviderResponse {
  return {
    content: null,
    finish_reason: 'tool_calls',
    usage,
    tool_calls: calls.map((call, index) => ({
      id: call.id ?? `call_${index + 1}`,
      type: 'function' as const,
      function: { name: call.name, arguments: typeof call.args === 'string' ? call.args : JSON.stringify(call.args) },
    })),
  };
}

/** A provider failure, as a scripted turn. */
export function failure(code: ProviderFailure['error_code'], details: ProviderFailure['details']): ProviderFailure {
  return new ProviderFailure(code, `scripted ${code}`, details);
}
