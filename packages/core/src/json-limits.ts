import { byteSize } from './canonical.ts';
import { RequestError } from './errors.ts';

/**
 * Why a value would not come back unchanged from a JSON round trip within `maxDepth` levels of
 * nesting, if it would not: a number JSON cannot hold (Infinity, NaN), a value of no JSON type
 * (a BigInt, a function, a symbol), or deeper nesting. `undefined` passes: JSON leaves it out. Walked without
 * recursion, so no input can overflow the stack.
 */
export function jsonProblem(root: unknown, maxDepth: number): string | undefined {
  const stack: [unknown, number][] = [[root, 0]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    switch (typeof value) {
      case 'string':
      case 'boolean':
      case 'undefined': // left out by JSON, as an absent option
        continue;
      case 'number':
        if (!Number.isFinite(value)) return 'holds a number outside the range JSON numbers can carry';
        continue;
      case 'object':
        break;
      default:
        return `holds a value of type ${typeof value}, which JSON cannot carry`;
    }
    if (value === null) continue;
    if (depth >= maxDepth) return `is nested more than ${maxDepth} levels deep`;
    for (const child of Array.isArray(value) ? value : Object.values(value)) stack.push([child, depth + 1]);
  }
  return undefined;
}

/** How large and how deep a run's `config` and `exec_config` may be. */
export const REQUEST_JSON_LIMITS = Object.freeze({ max_bytes: 256 * 1024, max_depth: 32 });

/**
 * Refuses a request's JSON option that is not plain JSON, nests too deeply or is too large, with
 * a {@link RequestError} naming the option. Undefined and null pass.
 */
export function checkRequestJson(where: string, value: unknown): void {
  if (value === undefined || value === null) return;
  const problem = jsonProblem(value, REQUEST_JSON_LIMITS.max_depth);
  if (problem) throw new RequestError('invalid_request', `${where} ${problem}`);
  const size = byteSize(JSON.stringify(value));
  if (size > REQUEST_JSON_LIMITS.max_bytes) {
    throw new RequestError('payload_too_large', `${where} is ${size} bytes; the limit is ${REQUEST_JSON_LIMITS.max_bytes}`);
  }
}
