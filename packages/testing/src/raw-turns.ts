import type { ProviderResponse } from '@arcflow/core';

/** A response as a model might really send it: any shape at all, typed as a response only to be scripted. */
export function rawTurn(value: unknown): ProviderResponse {
  return value as ProviderResponse;
}

/** A raw tool-call turn: calls given as `[id, name, argumentsText]`, with optional extra fields. */
export function rawCalls(calls: readonly (readonly [unknown, unknown, unknown])[], extra: Record<string, unknown> = {}): ProviderResponse {
  return rawTurn({
    content: null,
    finish_reason: 'tool_calls',
    usage: { input: 1, output: 1, total: 2 },
    tool_calls: calls.map(([id, name, args]) => ({ ...(id === undefined ? {} : { id }), type: 'function', function: { name, arguments: args } })),
    ...extra,
  });
}
