/** A round's calls as recordResponse (or openToolStep) stores them: `[[tool_call_id, tool_name, definition_hash?], …]`. */
export type RoundCall = [tool_call_id: string, tool_name: string, definition_hash?: string];

/** A round's stored calls, or undefined when what is stored is not such a list (another process's write). */
export function readRoundCalls(text: string): RoundCall[] | undefined {
  let calls: unknown;
  try {
    calls = JSON.parse(text);
  } catch {
    return undefined;
  }
  const isCall = (call: unknown) => Array.isArray(call) && typeof call[0] === 'string' && typeof call[1] === 'string' && (call[2] === undefined || typeof call[2] === 'string');
  return Array.isArray(calls) && calls.every(isCall) ? (calls as RoundCall[]) : undefined;
}
