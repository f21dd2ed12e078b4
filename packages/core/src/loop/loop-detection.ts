import { canonicalJson } from '../canonical.ts';
import type { ResolvedLoopDetection } from '../definitions/settings.ts';
import type { ParsedArguments } from './arguments.ts';

/** A call's signature: its tool name plus the canonical JSON of its arguments (the raw text if they could not be used). */
export function callSignature(toolName: string, args: ParsedArguments, raw: string): string {
  return `${toolName}\u0000${args.ok ? canonicalJson(args.value) : raw}`;
}

/**
 * How often `signature` occurs within the last `window` calls, counting this one. A result of at
 * least `threshold` means the call repeats.
 */
export function countRepeats(earlier: readonly string[], signature: string, detection: ResolvedLoopDetection): number {
  const recent = [...earlier.slice(Math.max(0, earlier.length - (detection.window - 1))), signature];
  return recent.filter((candidate) => candidate === signature).length;
}
