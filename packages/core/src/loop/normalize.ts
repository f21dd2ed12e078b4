import { byteSize, wellFormed } from '../canonical.ts';
import { MAX_ARGUMENT_BYTES, MAX_RESPONSE_BYTES, MAX_TOOL_CALLS_PER_RESPONSE } from '../defaults.ts';
import type { Tokens } from '../vocabulary/tokens.ts';
import { NamePattern } from '../names.ts';
import type { RequestedToolCall } from '../vocabulary/messages.ts';
import { ProviderFailure, type ProviderResponse } from '../provider.ts';

const TOOL_CALL_ID = NamePattern.toolCallId;
const TOOL_NAME = NamePattern.tool;

/** Most tokens one provider call may report per count; more is taken as this many. */
export const MAX_TOKENS_PER_CALL = 1_000_000_000;

const FINISH_REASON = /^[A-Za-z0-9_.-]{1,40}$/;
const MODEL_ID = /^[\x21-\x7e]{1,128}$/;
const SHOWN_NAME_CHARS = 64;

/**
 * A provider's response made safe to store, replay and show, at the one boundary every runner
 * passes (`runLocal` and the engine's provider job call it on whatever the provider returned,
 * test mode's scripted turns included):
 *
 * - every call has an id of `NamePattern.toolCallId`'s form, unique in the response: a missing,
 *   malformed or repeated id is replaced by a fresh one (`call_<iteration>_<n>`); job ids built
 *   from ids are therefore injective;
 * - a tool name not of `NamePattern.tool`'s form can name no tool: it is kept only as a bounded,
 *   printable stand-in (other characters shown as `?`), which the loop answers as unknown;
 * - `finish_reason` and `model` are kept only in their usual forms (else `unknown` / left out);
 * - token counts are non-negative integers (a fraction is rounded down; anything else is 0);
 * - arguments over {@link MAX_ARGUMENT_BYTES} are not kept: the call carries empty arguments and
 *   `oversize_arguments` records their size, so the loop answers it as too large.
 *
 * Throws a retryable `malformed_response` failure for a value that is not a response at all, and
 * for one past the bounds of what a turn may hold: more than {@link MAX_TOOL_CALLS_PER_RESPONSE}
 * calls, or over {@link MAX_RESPONSE_BYTES} of text and kept arguments together.
 */
export function normalizeResponse(raw: unknown, iteration: number): ProviderResponse {
  if (raw === null || typeof raw !== 'object') throw malformed('the response is not an object');
  const body = raw as Record<string, unknown>;
  const content = body.content;
  if (content !== null && content !== undefined && typeof content !== 'string') throw malformed('content is not text');
  const rawCalls = body.tool_calls ?? [];
  if (!Array.isArray(rawCalls)) throw malformed('tool_calls is not a list');
  if (rawCalls.length === 0 && typeof content !== 'string') throw malformed('neither content nor tool_calls');
  // Bounds on what one response may make the loop store, run and send back.
  if (rawCalls.length > MAX_TOOL_CALLS_PER_RESPONSE) throw malformed(`${rawCalls.length} tool calls; the limit is ${MAX_TOOL_CALLS_PER_RESPONSE}`);
  let responseBytes = typeof content === 'string' ? byteSize(content) : 0;
  const oversize: Record<string, number> = {};
  const ids = uniqueIds(rawCalls, iteration);
  const tool_calls: RequestedToolCall[] = rawCalls.map((entry: unknown, index) => {
    const call = (entry ?? {}) as Record<string, unknown>;
    const fn = (call.function ?? {}) as Record<string, unknown>;
    const id = ids[index]!;
    let args = typeof fn.arguments === 'string' ? fn.arguments : fn.arguments === undefined ? '' : (JSON.stringify(fn.arguments) ?? '');
    const size = byteSize(args);
    if (size > MAX_ARGUMENT_BYTES) {
      oversize[id] = size;
      args = '';
    } else {
      responseBytes += size;
    }
    return { id, type: 'function', function: { name: toolName(fn.name), arguments: args } };
  });
  if (responseBytes > MAX_RESPONSE_BYTES) throw malformed(`${responseBytes} bytes of text and arguments; the limit is ${MAX_RESPONSE_BYTES}`);
  const usage = (body.usage ?? {}) as Record<string, unknown>;
  const input = tokenCount(usage.input);
  const output = tokenCount(usage.output);
  const total = usage.total === undefined ? input + output : tokenCount(usage.total);
  const finish = body.finish_reason;
  return {
    // Text with a lone surrogate half is made whole (U+FFFD), as every store and wire would make it: both runners keep the same text.
    content: typeof content === 'string' ? wellFormed(content) : null,
    tool_calls,
    finish_reason: typeof finish === 'string' && FINISH_REASON.test(finish) ? finish : tool_calls.length > 0 ? 'tool_calls' : 'unknown',
    usage: { input, output, total } satisfies Tokens,
    ...(typeof body.model === 'string' && MODEL_ID.test(body.model) ? { model: body.model } : {}),
    ...(Object.keys(oversize).length > 0 ? { oversize_arguments: oversize } : {}),
  };
}

function malformed(what: string): ProviderFailure {
  return new ProviderFailure('malformed_response', `malformed provider response: ${what}`, { retryable: true });
}

/**
 * Ids in call order: each well-formed id is kept the first time it appears; every other call gets
 * a fresh one. An id that names a property every object has (`constructor`, `__proto__`) is not
 * kept: calls are looked up by id in plain objects.
 */
function uniqueIds(calls: readonly unknown[], iteration: number): string[] {
  const given = calls.map((entry) => {
    const id = (entry as { id?: unknown } | null)?.id;
    return typeof id === 'string' && TOOL_CALL_ID.test(id) && !(id in Object.prototype) ? id : undefined;
  });
  const taken = new Set<string>();
  const keep = given.map((id) => {
    if (id === undefined || taken.has(id)) return undefined;
    taken.add(id);
    return id;
  });
  // Fresh ids avoid every kept id, whatever position it has.
  return keep.map((id, index) => {
    if (id !== undefined) return id;
    let fresh = `call_${iteration}_${index + 1}`;
    for (let n = 2; taken.has(fresh); n += 1) fresh = `call_${iteration}_${index + 1}_${n}`;
    taken.add(fresh);
    return fresh;
  });
}

/**
 * A name of the tool-name form as it is, and so is any other short printable name (`functions.get_weather`:
 * the model reads it back in `Error: unknown tool '…'`); anything else as a bounded stand-in. Neither
 * matches a tool.
 */
function toolName(name: unknown): string {
  if (typeof name === 'string' && TOOL_NAME.test(name)) return name;
  if (typeof name !== 'string' || name === '') return '?';
  const chars = [...name];
  if (chars.length <= SHOWN_NAME_CHARS && !/[\p{C}\s]/u.test(name)) return name;
  const shown = chars
    .slice(0, SHOWN_NAME_CHARS)
    .map((char) => (/^[A-Za-z0-9_-]$/.test(char) ? char : '?'))
    .join('');
  return chars.length > SHOWN_NAME_CHARS ? `${shown}…` : shown;
}

function tokenCount(value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) return 0;
  return Math.min(Math.floor(value), MAX_TOKENS_PER_CALL);
}
