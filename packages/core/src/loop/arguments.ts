import { byteSize } from '../canonical.ts';
import { MAX_ARGUMENT_BYTES } from '../defaults.ts';
import { jsonProblem } from '../json-limits.ts';

/** Arguments as the loop reads them: a JSON value a handler can be given, or why not. */
export type ParsedArguments = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly violation: string };

/** How deeply arguments may nest (objects and arrays). */
export const MAX_ARGUMENT_DEPTH = 64;

/** The violation for arguments too large to keep. */
export function argumentsTooLarge(size: number): string {
  return `arguments are too large (${size} bytes; the limit is ${MAX_ARGUMENT_BYTES})`;
}

/**
 * Parses a call's raw argument text once; empty text means no arguments. Only values that survive
 * a JSON round trip unchanged pass: a number JSON cannot hold (`1e400` parses as Infinity and
 * would reach a handler as `null`) and nesting deeper than {@link MAX_ARGUMENT_DEPTH} are refused,
 * so the value validated is the value stored and handed to the handler.
 */
export function parseArguments(raw: string): ParsedArguments {
  if (raw.trim() === '') return { ok: true, value: {} };
  const size = byteSize(raw);
  if (size > MAX_ARGUMENT_BYTES) return { ok: false, violation: argumentsTooLarge(size) };
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return { ok: false, violation: NOT_JSON };
  }
  const violation = unrepresentableArguments(value);
  return violation === undefined ? { ok: true, value } : { ok: false, violation };
}

/** Why an arguments value would not reach a handler unchanged through JSON, if it would not. */
export function unrepresentableArguments(value: unknown): string | undefined {
  const problem = jsonProblem(value, MAX_ARGUMENT_DEPTH);
  return problem === undefined ? undefined : `arguments ${problem}`;
}

const NOT_JSON = 'arguments are not valid JSON';
