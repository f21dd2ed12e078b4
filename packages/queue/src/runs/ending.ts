import { type RunError, type SkipReason, ToolResultText } from '@arcflow/core';
import type { PendingEvent } from '../records/event-codec.ts';
import type { OutputType } from '../records/output-format.ts';
import type { RoundCall } from '../records/round-call.ts';
import type { StoreContext } from '../store-context.ts';

/** How a run ends. */
export type RunOutcome =
  /** `output_type`: what the output text is, when not plain text (see `output-format.ts`). */
  { status: 'completed'; output: string; output_type?: OutputType } | { status: 'failed'; error: RunError; output?: string } | { status: 'cancelled'; output?: string };

/** A run's end as the store writes it: the outcome, the step it ends in, and that step's last events (if any). */
export interface RunEnding {
  readonly outcome: RunOutcome;
  readonly step_id: string;
  readonly events?: readonly PendingEvent[];
  /**
   * How calls still open are closed: with this content for the model and a `ToolCallFailed` of
   * this code. A cancel closes them as `cancelled` unless told otherwise; other endings leave
   * them unless they say (a run failed because it stalled closes them as `worker_lost`).
   */
  readonly closing?: { readonly content: string; readonly code: string };
  /** A workflow run's steps still open: running ones end as `running`, those not started are skipped with `skip_reason`. */
  readonly steps?: { readonly running: 'cancelled' | 'failed'; readonly skip_reason: SkipReason };
}

/** Whether a `finishRun` ended the run, and the calls its cancel closed. */
export interface RunEnded {
  readonly ended: boolean;
  readonly closed: readonly RoundCall[];
  /** Set when this call ended the run: what its metrics name it by (SPEC §18). */
  readonly facts?: EndedRunFacts;
}

/**
 * What a run's metrics name it by, read by the script that ended it: its agent (or workflow), its
 * tenant (absent: `default`) and when it was enqueued (ms); and its parent, for a child run,
 * whose call its end settles (SPEC §13).
 */
export interface EndedRunFacts {
  readonly agent: string;
  readonly workflow?: string;
  readonly tenant?: string;
  readonly created_at: number;
  readonly parent_run_id?: string;
}

/** The scripts' `{created_at, agent, workflow, parent_run_id, tenant}` (see finish.lua's runFacts). */
export function endedRunFacts(raw: unknown): EndedRunFacts | undefined {
  if (!Array.isArray(raw)) return undefined;
  const [created_at, agent, workflow, parent_run_id, tenant] = raw as (string | null)[];
  if (!agent || !created_at) return undefined;
  return {
    agent,
    ...(workflow ? { workflow } : {}),
    ...(tenant ? { tenant } : {}),
    created_at: Number(created_at),
    ...(parent_run_id ? { parent_run_id } : {}),
  };
}

export const CANCEL_CLOSING = Object.freeze({ content: ToolResultText.cancelled(), code: 'cancelled' });

/** A run's ending as the scripts' `finish` reads it (redis/lua/finish.lua): `finishRun`'s argument, and `recordResponse`'s `ending`. */
export function endingArgument(context: StoreContext, ending: RunEnding): Record<string, unknown> {
  const { outcome, step_id, events = [] } = ending;
  return {
    status: outcome.status,
    step_id,
    ts: Date.now(),
    output: outcome.output,
    output_type: outcome.status === 'completed' ? outcome.output_type : undefined,
    error: outcome.status === 'failed' ? JSON.stringify(outcome.error) : undefined,
    error_code: outcome.status === 'failed' ? outcome.error.error_code : undefined,
    closing: ending.closing ?? (outcome.status === 'cancelled' ? CANCEL_CLOSING : undefined),
    retention_seconds: context.retentionSeconds,
    events: context.codec.pairs(events),
    steps: ending.steps,
  };
}

/** A run's end, written once. */
export class RunEndings {
  constructor(private readonly context: StoreContext) {}

  /**
   * Ends the run once (completed, failed or cancelled): `ended` is false if it had already ended.
   * `closed`: the open calls a cancel closed, whose tool jobs have no call to run any more.
   */
  async finishRun(run_id: string, ending: RunEnding): Promise<RunEnded> {
    const { keys, scripts } = this.context;
    const [finished, closed = [], facts] = (await scripts.finishRun([keys.record(run_id)], endingArgument(this.context, ending))) as [number, string[]?, unknown?];
    const ended = endedRunFacts(facts);
    return {
      ended: finished === 1,
      closed: closed.map((json) => ({ ...(JSON.parse(json) as Omit<RoundCall, 'fanned_out'>), fanned_out: true })),
      ...(ended ? { facts: ended } : {}),
    };
  }
}
