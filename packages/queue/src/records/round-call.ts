import type { EventDraft, RunSpent, StateChange } from '@arcflow/core';

/** A call of a round, as the store records it. */
export interface RoundCall {
  readonly step_id: string;
  readonly iteration: number;
  readonly tool_call_id: string;
  readonly tool_name: string;
  /** The definition hash of the tool the call was planned with (absent for a call no handler runs): names its job's queue. */
  readonly definition_hash?: string | undefined;
  /** Fanned out to a tool job, so counted among its round's open calls until its result is recorded. */
  readonly fanned_out: boolean;
  /** Calls of its round wait for approval (only then may its result leave the run waiting). */
  readonly round_waits?: boolean;
}

/** An event with the time it happened, for an event written some time after (its `ts`). */
export interface TimedEvent {
  readonly event: EventDraft;
  readonly ts: number;
}

/** A call's result as a tool job or the join records it. */
export interface ToolResult {
  readonly content: string;
  readonly terminal: EventDraft;
  /** The traceparent of the call's `execute_tool` span, for the join's links (when traced). */
  readonly spanTraceparent?: string;
  /** The attempt's `ToolCallStarted`, when it was not written before the handler ran. */
  readonly started?: TimedEvent;
  /** A completed call's run-state changes (SPEC §17), recorded with its result. */
  readonly changes?: readonly StateChange[];
  /** A child run's call (SPEC §13): what the child and its own children spent, added to the run's for its budget. */
  readonly spend?: RunSpent;
}

/** A call's recorded result, and how many calls of its round are still open (0: the round is settled). */
export interface RecordedResult {
  readonly content: string;
  readonly openInRound: number;
  /** This write recorded it (not an earlier one). */
  readonly recordedNow: boolean;
}

/** Whether a tool job should run its call: yes, no (recorded already), or no (the run has ended). */
export type CallStart = { readonly status: 'run' | 'ended' } | { readonly status: 'recorded'; readonly openInRound: number };

/** A Lua script's flat `field, value, …` reply as a record. */
export function pairsToRecord(flat: readonly string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let index = 0; index + 1 < flat.length; index += 2) record[flat[index]!] = flat[index + 1]!;
  return record;
}
