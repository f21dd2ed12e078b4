import { type RunState, type SettledCall, type StateChange, changesFit } from '@arcflow/core';
import type { RecordedResult, RoundCall, ToolResult } from '../records/round-call.ts';
import type { RunStore } from '../runs/run-store.ts';
import { parseEntry } from '../steps/state-log.ts';

/** The run state a call's round began with, and the most it may take (SPEC §17). */
export interface StateLimit {
  readonly base: RunState;
  /** The bytes of `base`'s JSON. */
  readonly base_size: number;
  readonly max_state_bytes: number;
  /** The call's end when its changes do not fit: `state_too_large`, with none of them. */
  tooLarge(): SettledCall;
}

/**
 * Records a call's result. A completed call's state changes are accepted only if the state its round
 * began with, plus the changes recorded so far in the round, plus its own, fits (SPEC §17, "the limit
 * holds"); else the call is recorded as `state_too_large`, none of its changes applied. The recording
 * script refuses a check that missed changes another call of the round recorded meanwhile, and the
 * check is made again with them. Returns what was recorded and the call's end as it stands.
 */
export async function recordWithinStateLimit(
  store: RunStore,
  run_id: string,
  call: RoundCall,
  settled: SettledCall,
  extra: Pick<ToolResult, 'spanTraceparent' | 'started'>,
  limit: StateLimit,
): Promise<{ readonly recorded: RecordedResult | undefined; readonly settled: SettledCall }> {
  let seen = 0;
  for (;;) {
    const result = { ...extra, content: settled.content, terminal: settled.terminal, ...(settled.changes ? { changes: settled.changes } : {}) };
    if (!settled.changes) return { recorded: await store.recordToolResult(run_id, call, result), settled };
    const recorded = await store.recordToolResultWithin(run_id, call, result, seen);
    if (!recorded || !('unseen' in recorded)) return { recorded, settled };
    seen = Object.keys(recorded.unseen).length;
    const ordered = await inCallOrder(store, run_id, call, recorded.unseen, settled.changes);
    if (!changesFit(limit.base, limit.base_size, ordered, limit.max_state_bytes)) settled = limit.tooLarge();
  }
}

/** The round's recorded changes and the call's own, in the model's order of the round's calls. */
async function inCallOrder(
  store: RunStore,
  run_id: string,
  call: RoundCall,
  recorded: Readonly<Record<string, string>>,
  own: readonly StateChange[],
): Promise<(readonly StateChange[])[]> {
  const [ids = []] = await store.toolCallIds(run_id, [call]);
  const order = ids.includes(call.tool_call_id) ? ids : [...ids, call.tool_call_id];
  // A call recorded but missing from the order (not expected) still counts, after the others.
  for (const id of Object.keys(recorded)) if (!order.includes(id)) order.push(id);
  return order.map((id) => {
    if (id === call.tool_call_id) return own;
    const line = recorded[id];
    return line === undefined ? [] : parseEntry(line, `state changes of call ${id} of ${run_id}/${call.step_id}/${call.iteration}`);
  });
}
