import { type CallPlace, type EventDraft, type StateChange, type StepState, applyStateChangesSized } from '@arcflow/core';
import { parseEntry } from '../steps/state-log.ts';
import type { RunStore } from '../runs/run-store.ts';
import type { StateEntry } from '../steps/step-store.ts';

/** What a round's calls see of the run state (SPEC §17): how many recorded entries make it, and its limit. */
export interface RoundState {
  readonly entries: number;
  readonly max_state_bytes: number;
  /** The step whose state log holds the entries, when not the call's own. */
  readonly log_step?: string;
}

/** The run state a step's next round starts from, as its tool jobs and inline calls are told it. */
export function roundStateOf(state: StepState, max_state_bytes: number): RoundState {
  return { entries: state.state_entries ?? 0, max_state_bytes };
}

/**
 * A round's run-state changes, joined (SPEC §17): the completed calls' changes (recorded with their
 * results) in the model's order of the calls, applied to the state the round began with. Returns
 * nothing when no call recorded changes; else the state log's next entry and, when its changes
 * changed a key, its `StateUpdated`.
 */
export async function joinRoundState(
  store: RunStore,
  run_id: string,
  state: StepState,
  place: CallPlace,
  /** The round's call ids, in the model's order. */
  callIds: readonly string[],
  recorded: Readonly<Record<string, string>>,
): Promise<{ readonly entry: StateEntry; readonly event?: EventDraft } | undefined> {
  const changes: StateChange[] = [];
  for (const id of callIds) {
    const line = recorded[id];
    if (line !== undefined) changes.push(...parseEntry(line, `state changes of call ${id} of ${run_id}/${place.step_id}/${place.iteration}`));
  }
  if (changes.length === 0) return undefined;
  const at = state.state_entries ?? 0;
  const before = await store.stateLogs.readSized(run_id, place.step_id, at);
  const applied = applyStateChangesSized(before.state, before.size, changes);
  return {
    entry: { at, changes, state: applied.state, size: applied.size },
    // Changes that left every key as it was (a delete of a key not held, a set to the value held) are logged (a fork
    // counts a round that recorded changes as one entry) but changed nothing to report.
    ...(applied.keys.length > 0 ? { event: { kind: 'StateUpdated', step_id: place.step_id, iteration: place.iteration, keys: applied.keys, state_size_bytes: applied.size } } : {}),
  };
}
