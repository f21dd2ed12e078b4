import { TOOL_TERMINAL_KINDS, type TraceEvent } from '@arcflow/core';

/**
 * Checks the log's invariants and throws on the first breach: `seq` is 1..n with no gaps or
 * repeats, every tool call that appears ends in exactly one terminal event, and a call's
 * `ToolCallStarted` repeats only with a higher `attempt`.
 */
export function assertEventInvariants(events: readonly TraceEvent[]): void {
  events.forEach((event, index) => {
    if (event.seq !== index + 1) throw new Error(`event ${index} has seq ${event.seq}, expected ${index + 1}`);
  });
  const terminals = new Map<string, number>();
  const seen = new Set<string>();
  const lastAttempt = new Map<string, number>();
  for (const event of events) {
    if (!('tool_call_id' in event)) continue;
    const key = `${event.step_id}/${event.iteration}/${event.tool_call_id}`;
    seen.add(key);
    if (event.kind === 'ToolCallStarted') {
      const before = lastAttempt.get(key) ?? 0;
      if (event.attempt <= before) throw new Error(`tool call ${key} started attempt ${event.attempt} after attempt ${before}`);
      lastAttempt.set(key, event.attempt);
    }
    if (TOOL_TERMINAL_KINDS.has(event.kind)) terminals.set(key, (terminals.get(key) ?? 0) + 1);
  }
  for (const key of seen) {
    const count = terminals.get(key) ?? 0;
    if (count !== 1) throw new Error(`tool call ${key} has ${count} terminal events, expected exactly 1`);
  }
}
