import type { CallPlace, EventDraft, RunSpent, TryPosition } from '@arcflow/core';
import type { PendingEvent } from '../records/event-codec.ts';
import { refuseWrongType, writeTryPosition } from '../records/formats.ts';
import { type CallStart, type RecordedResult, type RoundCall, type TimedEvent, type ToolResult, pairsToRecord } from '../records/round-call.ts';
import type { StoreContext } from '../store-context.ts';
import { type ApprovalResolution, type RunStatus, TERMINAL_STATUSES, type ToolResultAnswer } from '@arcflow/core';
import type { WaitingStore } from './waiting/waiting-store.ts';
import { type ChildStore, wholeCount } from './waiting/child-store.ts';

/**
 * The calls of a round in Redis: a tool call's start and its result, each written once, a
 * provider call moved to its next try; and the calls that wait (approvals, results from outside, child runs).
 */
export class CallStore {
  /** Calls waiting for a person's approval (SPEC §10). */
  readonly approvals: WaitingStore<ApprovalResolution>;
  /** Calls waiting for a result from outside (SPEC §20). */
  readonly toolResults: WaitingStore<ToolResultAnswer>;

  constructor(
    private readonly context: StoreContext,
    waits: { readonly approvals: WaitingStore<ApprovalResolution>; readonly toolResults: WaitingStore<ToolResultAnswer> },
    /** Child runs' ties to their parents' calls (SPEC §13). */
    readonly children: ChildStore,
  ) {
    this.approvals = waits.approvals;
    this.toolResults = waits.toolResults;
  }

  /**
   * Whether the call's run has not ended: one read. (A call is closed without its result, by
   * another process, only when its run ends: a cancel, a failed step of a `fail_fast` workflow.)
   */
  async runGoesOn(run_id: string): Promise<boolean> {
    const status = await this.context.redis.hget(this.context.keys.record(run_id), 'status').catch(refuseWrongType(`record of run ${run_id}`));
    return status !== null && !TERMINAL_STATUSES.has(status as RunStatus);
  }

  /**
   * Writes the call's `ToolCallStarted` (once per `once` id; '' for none) unless its result is already
   * recorded (then: how many calls of its round are still open) or the run has ended. One round trip.
   */
  async startToolCall(run_id: string, call: RoundCall, started: TimedEvent, once: string): Promise<CallStart> {
    const [outcome, openInRound] = (await this.context.scripts.startToolCall(
      [this.context.keys.record(run_id)],
      [call.step_id, call.iteration, call.tool_call_id, once, this.context.codec.eventJson(started.event, started.ts)],
    )) as [number, number?];
    if (outcome === 1) return { status: 'run' };
    return outcome === 0 ? { status: 'recorded', openInRound: openInRound ?? 0 } : { status: 'ended' };
  }

  /**
   * Records a call's result and its terminal event, once, closing the call if it was fanned out;
   * a `started` event not written yet goes in the same step, just before the terminal one.
   * Returns the content that stands and how many calls of its round are still open, or
   * `undefined` when the run ended before anything was recorded.
   */
  async recordToolResult(run_id: string, call: RoundCall, result: ToolResult): Promise<RecordedResult | undefined> {
    const recorded = await this.recordToolResultWithin(run_id, call, result, 0);
    if (recorded && 'unseen' in recorded) throw new Error(`call ${call.tool_call_id} has state changes: record it with recordToolResultWithin`);
    return recorded;
  }

  /**
   * {@link recordToolResult} for a call with run-state changes (SPEC §17), checked to fit with the
   * `seen` calls' changes found recorded in its round: when others are recorded now, nothing is
   * written and they are returned (`unseen`: their changes by call id), for the check to be made again.
   */
  async recordToolResultWithin(
    run_id: string,
    call: RoundCall,
    result: ToolResult,
    seen: number,
  ): Promise<RecordedResult | { readonly unseen: Readonly<Record<string, string>> } | undefined> {
    const { codec } = this.context;
    const [outcome, stored, openInRound] = (await this.context.scripts.recordToolResult(
      [this.context.keys.record(run_id)],
      [
        call.step_id,
        call.iteration,
        call.tool_call_id,
        result.content,
        call.fanned_out ? '1' : '0',
        codec.eventJson(result.terminal),
        result.spanTraceparent ?? '',
        result.started ? codec.eventJson(result.started.event, result.started.ts) : '',
        failureCode(result.terminal),
        call.round_waits ? '1' : '0',
        result.changes && result.changes.length > 0 ? JSON.stringify(result.changes) : '',
        result.spend ? spendArgument(result.spend) : '',
        String(seen),
      ],
    )) as [number, (string | string[])?, number?];
    if (outcome === -1) return undefined;
    if (outcome === -2) return { unseen: pairsToRecord(stored as string[]) };
    return { content: outcome === 0 ? (stored as string) : result.content, openInRound: openInRound ?? 0, recordedNow: outcome === 1 };
  }

  /**
   * Moves provider call `iteration` of a step to `position`, with the failed try's events, in one
   * step. False when the run has ended.
   */
  async moveCall(run_id: string, place: CallPlace, position: TryPosition, events: readonly PendingEvent[]): Promise<boolean> {
    const { step_id, iteration } = place;
    const written = await this.context.scripts.moveCall([this.context.keys.record(run_id)], {
      step_id,
      iteration,
      position: writeTryPosition(position),
      events: this.context.codec.pairs(events),
    });
    return written === 1;
  }
}

/** A terminal event's failure code, kept beside the call's result (a tool step's outcome); '' when it completed. */
function failureCode(terminal: EventDraft): string {
  switch (terminal.kind) {
    case 'ToolCallCompleted':
      return '';
    case 'ToolCallFailed':
      return terminal.error_code;
    case 'LoopDetected':
      return 'loop_detected';
    default:
      return 'invalid_arguments';
  }
}

/** A child's spend as recordToolResult.lua takes it: 'tokens tool_calls', then its cost in micro-dollars when it made priced calls (SPEC §14). */
function spendArgument(spend: RunSpent): string {
  const counts = `${wholeCount(spend.tokens)} ${wholeCount(spend.tool_calls)}`;
  return spend.cost_micros === undefined ? counts : `${counts} ${wholeCount(spend.cost_micros)}`;
}
