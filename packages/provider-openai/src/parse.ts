import { ProviderFailure, type ProviderResponse, type RequestedToolCall } from '@arcflow/core';

const malformed = (what: string) => new ProviderFailure('malformed_response', `malformed provider response: ${what}`, { retryable: true });

/**
 * Reads a chat-completions body into a provider response. Tool-call arguments stay raw text, so
 * arguments that are not JSON are flagged by the loop, not thrown here.
 */
export function parseCompletion(body: unknown): ProviderResponse {
  if (body === null || typeof body !== 'object') throw malformed('body is not an object');
  const record = body as Record<string, unknown>;
  const choice = Array.isArray(record.choices) ? (record.choices[0] as Record<string, unknown> | undefined) : undefined;
  const message = choice?.message as Record<string, unknown> | undefined;
  if (!message || typeof message !== 'object') throw malformed('no choices[0].message');
  const rawCalls = message.tool_calls ?? [];
  if (!Array.isArray(rawCalls)) throw malformed('message.tool_calls is not a list');
  const tool_calls: RequestedToolCall[] = rawCalls.map((raw) => {
    const call = raw as Record<string, unknown> | null;
    const fn = call?.function as Record<string, unknown> | undefined;
    const args = fn?.arguments;
    return {
      // A missing id stays empty: normalizeResponse gives it one that no other call of the response has.
      id: typeof call?.id === 'string' ? call.id : '',
      type: 'function',
      // A call with no name is answered as an unknown tool, so the model can correct itself.
      function: { name: typeof fn?.name === 'string' ? fn.name : '', arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}) },
    };
  });
  // With neither text nor calls, a refusal (`message.refusal`) is the model's answer.
  const content = contentText(message.content) ?? (tool_calls.length === 0 && typeof message.refusal === 'string' && message.refusal !== '' ? message.refusal : null);
  if (tool_calls.length === 0 && content === null) throw malformed('neither content nor tool_calls');
  const usage = (record.usage ?? {}) as Record<string, unknown>;
  const input = numberOr0(usage.prompt_tokens);
  const output = numberOr0(usage.completion_tokens);
  return {
    content,
    tool_calls,
    finish_reason: typeof choice?.finish_reason === 'string' ? choice.finish_reason : tool_calls.length ? 'tool_calls' : 'stop',
    usage: { input, output, total: numberOr0(usage.total_tokens) || input + output },
    // Counts are made whole and bounded by normalizeResponse, which every runner applies.
    ...(typeof record.model === 'string' ? { model: record.model } : {}),
  };
}

function numberOr0(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

/** A message's `content` as text: a string, or the text parts of a content list joined. */
function contentText(content: unknown): string | null {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return null;
  if (!Array.isArray(content)) throw malformed('message.content is not text');
  const parts = content.filter((part): part is { text: string } => typeof part?.text === 'string' && (part.type === 'text' || part.type === 'output_text'));
  return parts.length > 0 ? parts.map((part) => part.text).join('') : null;
}
