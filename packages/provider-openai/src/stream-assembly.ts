import { MAX_RESPONSE_BYTES, MAX_TOOL_CALLS_PER_RESPONSE, ProviderFailure, type ProviderResponse } from '@arcflow/core';
import { parseCompletion } from './parse.ts';

const malformed = (what: string) => new ProviderFailure('malformed_response', `malformed provider stream: ${what}`, { retryable: true });

/** A tool call being put together from its fragments. */
interface CallParts {
  id: string;
  name: string;
  arguments: string;
}

/**
 * Puts a streamed chat completion together from its `chat.completion.chunk`s, each untrusted:
 * text deltas (told to `onText` as they come), tool-call fragments keyed by `index` (the first
 * with an id and a name carries them; `arguments` are appended), the `finish_reason`, and usage
 * from whichever chunk has it (the last, with `include_usage`). `finish()` gives the assembled
 * body to the same parsing as a whole response, so every hardening rule applies to it; a stream
 * that ended without a `finish_reason` (cut off) is a malformed response.
 */
export class StreamAssembly {
  private readonly textParts: string[] = [];
  /** A delta carried `content` text (even empty): the answer's content is text, not null, as in a whole response. */
  private sawContent = false;
  private readonly refusalParts: string[] = [];
  private readonly calls = new Map<number, CallParts>();
  private finishReason: string | undefined;
  private usage: unknown;
  private model: string | undefined;
  private bytes = 0;

  constructor(private readonly onText: ((delta: string) => void) | undefined) {}

  add(chunk: unknown): void {
    if (chunk === null || typeof chunk !== 'object' || Array.isArray(chunk)) throw malformed('a chunk is not an object');
    const record = chunk as Record<string, unknown>;
    if (record.usage !== undefined && record.usage !== null) this.usage = record.usage;
    if (typeof record.model === 'string') this.model = record.model;
    const choices = record.choices ?? [];
    if (!Array.isArray(choices)) throw malformed('choices is not a list');
    const choice = choices[0] as unknown;
    if (choice === undefined) return;
    if (choice === null || typeof choice !== 'object') throw malformed('choices[0] is not an object');
    const { delta, finish_reason } = choice as Record<string, unknown>;
    if (typeof finish_reason === 'string' && finish_reason !== '') this.finishReason = finish_reason;
    if (delta === undefined || delta === null) return;
    if (typeof delta !== 'object' || Array.isArray(delta)) throw malformed('choices[0].delta is not an object');
    const { content, tool_calls, refusal } = delta as Record<string, unknown>;
    if (content !== undefined && content !== null) {
      if (typeof content !== 'string') throw malformed('delta.content is not text');
      this.sawContent = true;
      if (content !== '') this.addText(content);
    }
    if (refusal !== undefined && refusal !== null) {
      if (typeof refusal !== 'string') throw malformed('delta.refusal is not text');
      this.count(refusal);
      this.refusalParts.push(refusal);
    }
    if (tool_calls !== undefined && tool_calls !== null) {
      if (!Array.isArray(tool_calls)) throw malformed('delta.tool_calls is not a list');
      for (const fragment of tool_calls) this.addFragment(fragment);
    }
  }

  /** The assembled response; throws a retryable `malformed_response` for a stream that never finished. */
  finish(): ProviderResponse {
    if (this.finishReason === undefined) throw malformed('the stream ended without a finish_reason');
    const tool_calls = [...this.calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, call]) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } }));
    // The message a whole response would have held: the same parsing decides what it answers.
    // Servers open every stream with an empty `content`: that is the answer only with no calls or refusal besides.
    const text = this.textParts.join('');
    const refusalText = this.refusalParts.join('');
    const content = text !== '' ? text : this.sawContent && tool_calls.length === 0 && refusalText === '' ? '' : null;
    const refusal = refusalText !== '' ? { refusal: refusalText } : {};
    return parseCompletion({
      choices: [{ message: { role: 'assistant', content, ...refusal, ...(tool_calls.length > 0 ? { tool_calls } : {}) }, finish_reason: this.finishReason }],
      ...(this.usage !== undefined ? { usage: this.usage } : {}),
      ...(this.model !== undefined ? { model: this.model } : {}),
    });
  }

  private addText(text: string): void {
    this.count(text);
    this.textParts.push(text);
    this.onText?.(text);
  }

  private addFragment(fragment: unknown): void {
    if (fragment === null || typeof fragment !== 'object') throw malformed('a tool-call fragment is not an object');
    const { index, id, function: fn } = fragment as Record<string, unknown>;
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= MAX_TOOL_CALLS_PER_RESPONSE) {
      throw malformed(`a tool-call fragment's index is not an integer from 0 to ${MAX_TOOL_CALLS_PER_RESPONSE - 1}`);
    }
    let call = this.calls.get(index);
    if (!call) {
      call = { id: '', name: '', arguments: '' };
      this.calls.set(index, call);
    }
    // Some servers repeat the id and name on every fragment: the first non-empty one stands.
    if (typeof id === 'string' && call.id === '') call.id = id;
    if (fn === undefined || fn === null) return;
    if (typeof fn !== 'object') throw malformed("a tool-call fragment's function is not an object");
    const { name, arguments: args } = fn as Record<string, unknown>;
    if (typeof name === 'string' && call.name === '') call.name = name;
    if (args !== undefined && args !== null) {
      if (typeof args !== 'string') throw malformed("a tool-call fragment's arguments are not text");
      this.count(args);
      call.arguments += args;
    }
  }

  /** Bounds what a stream may make this process hold, as a whole response is bounded when it is normalised. */
  private count(text: string): void {
    this.bytes += Buffer.byteLength(text, 'utf8');
    if (this.bytes > MAX_RESPONSE_BYTES) throw malformed(`over ${MAX_RESPONSE_BYTES} bytes of text and arguments`);
  }
}
