import { byteSize, wellFormed } from '../canonical.ts';

/** The exact texts the model receives when a call cannot succeed (SPEC §3). */
export const ToolResultText = {
  invalidArguments: (description: string) => `Error: invalid arguments — ${description}`,
  argumentsNotJson: () => 'Error: invalid arguments — arguments are not valid JSON',
  unknownTool: (name: string) => `Error: unknown tool '${name}'`,
  timedOut: () => 'Error: tool timed out — try again or use a different approach',
  unavailable: () => 'Error: tool temporarily unavailable',
  /** A tool's own failure answer (an MCP result with `isError: true`). */
  answeredError: (text: string) => `Error: ${text}`,
  cancelled: () => 'Error: tool call cancelled',
  stateFull: () => "Error: the run's state is full",
  rejected: (reason?: string) => `Error: the user rejected this call${reason ? ` — ${reason}` : ''}`,
  approvalTimedOut: () => 'Error: approval timed out',
  resultTimedOut: () => 'Error: no result came in time',
  childFailed: (error_code: string) => `Error: sub-agent failed — ${error_code}`,
  repeated: (previous: string) => `You already called this tool with these arguments: the result was ${previous}. Please proceed to the next step.`,
} as const;

/** Serialises a handler's return value: strings as they are (a lone surrogate half made U+FFFD), anything else as JSON. */
export function serialiseResult(value: unknown): string {
  if (typeof value === 'string') return wellFormed(value);
  if (value === undefined) return '';
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError('tool result is not JSON-serialisable');
  return text;
}

/**
 * Cuts `text` to at most `maxBytes` of UTF-8 (never inside a character) and appends a note of
 * how many bytes were cut. Text within the limit is returned unchanged.
 */
export function truncateResult(text: string, maxBytes: number): string {
  const size = byteSize(text);
  if (size <= maxBytes) return text;
  const buffer = Buffer.from(text, 'utf8');
  let end = maxBytes;
  // Step back over UTF-8 continuation bytes so no character is split.
  while (end > 0 && ((buffer[end] ?? 0) & 0xc0) === 0x80) end -= 1;
  const kept = buffer.subarray(0, end).toString('utf8');
  return `${kept}\n[result truncated: ${size - end} of ${size} bytes cut]`;
}
