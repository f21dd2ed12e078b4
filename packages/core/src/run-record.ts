import { createHash, randomBytes } from 'node:crypto';
import type { Tokens } from './vocabulary/tokens.ts';

export type RunStatus = 'queued' | 'running' | 'waiting' | 'completed' | 'failed' | 'cancelled';

/** Why a run failed: the failure's class, the reason's code, and a sentence for people. */
export interface RunError {
  readonly code: string;
  readonly error_code: string;
  readonly message: string;
}

/** A run as clients see it (`client.get`, `client.wait`, `runLocal`). */
export interface RunRecord {
  readonly run_id: string;
  readonly status: RunStatus;
  /** The agent (or workflow) the run was enqueued for. */
  readonly agent?: string;
  /** A workflow run's workflow (the same name as `agent`). */
  readonly workflow?: string;
  /** A workflow run's steps, by step id. */
  readonly steps?: Readonly<Record<string, StepRecord>>;
  /** The final answer's text; under an output schema, JSON text that validated (SPEC §11). */
  readonly output?: string;
  /** `output` parsed, when the run's agent had an output schema (SPEC §11); absent otherwise. */
  readonly output_json?: unknown;
  readonly error?: RunError;
  /** Its tokens; `cost_usd` (its child runs' included) once a call of a priced model was made (SPEC §14). */
  readonly usage: Tokens & { readonly cost_usd?: number };
  /** Provider calls made by the run. */
  readonly iterations: number;
  readonly created_at: number;
  readonly finished_at?: number;
  /** The run's OpenTelemetry trace id (32 hex characters), when it has one. */
  readonly trace_id?: string;
  /** The partition the run lives in (SPEC §9; 0 with one partition). */
  readonly partition?: number;
  /** A child run's parent run and the call of it that started the child (SPEC §13). */
  readonly parent_run_id?: string;
  readonly parent_tool_call_id?: string;
  /** The thread the run is on (SPEC §11). */
  readonly thread_id?: string;
  /** Who enqueued the run, when the enqueue said: `token:<subject>` for a run enqueued with an end user's token (SPEC §19). */
  readonly enqueued_by?: string;
  /** The tenant the run was enqueued for (SPEC §14), when one was named; a run without is the `default` tenant's. */
  readonly tenant?: string;
  /** The run's priority within its tenant (SPEC §14), 1 (first) … 10, when one was given (default 5). */
  readonly priority?: number;
  /** A run enqueued with `on_busy: steer`: the run its input was given to (it ended at once, completed). */
  readonly steered_into?: string;
  /** A run that took the input steered into a run that ended without it reaching the thread: the steering runs. */
  readonly steered_from?: readonly string[];
  /** Calls waiting for a person's approval (their arguments are for the approvers; never in events). */
  readonly pending_approvals?: readonly PendingApproval[];
  /** Calls waiting for their result from outside (SPEC §20): an external tool's, or a deferred handler's. */
  readonly pending_tool_results?: readonly PendingToolResult[];
  /** The run's state as its last round left it (SPEC §17); `{}` when nothing set one. */
  readonly state?: Readonly<Record<string, unknown>>;
  /** A fork (SPEC §15): the run, step and iteration it was forked from. */
  readonly forked_from?: ForkedFrom;
  /** A failed or cancelled run that was retried (SPEC §15): its retry's run id (a run is retried once). */
  readonly retried_by?: string;
}

/** Where a fork began (SPEC §15): the source run, the step re-run, and the iteration run live first. */
export interface ForkedFrom {
  readonly run_id: string;
  readonly step_id: string;
  readonly iteration: number;
}

/** A call waiting for approval, as the record lists it. */
export interface PendingApproval {
  readonly step_id: string;
  readonly iteration: number;
  readonly tool_call_id: string;
  readonly tool_name: string;
  readonly arguments: unknown;
  readonly requested_at: number;
  readonly expires_at: number;
}

/** A call waiting for its result from outside, as the record lists it (the same fields as an approval's). */
export type PendingToolResult = PendingApproval;

/** How a result from outside was taken (`client.submitToolResult` returns it, the same every time). */
export interface ToolResultAnswer {
  /** The call's outcome: `completed` for an output, `failed` for an error. */
  readonly status: 'completed' | 'failed';
  readonly answered_at: number;
}

/** How a waiting call was resolved (`client.approve` returns it, the same every time). */
export interface ApprovalResolution {
  readonly approved: boolean;
  readonly by?: string;
  readonly reason?: string;
  readonly resolved_at: number;
  readonly timed_out?: boolean;
}

/** Where a workflow step stands. */
export type StepStatus = 'pending' | 'running' | 'completed' | 'failed' | 'skipped' | 'cancelled';

/** Why a workflow step was skipped. */
export type SkipReason = 'dependency_failed' | 'run_failed' | 'cancelled';

/** One step of a workflow run, as its record shows it. */
export interface StepRecord {
  readonly status: StepStatus;
  readonly output?: string;
  readonly error?: RunError;
}

export const TERMINAL_STATUSES: ReadonlySet<RunStatus> = new Set(['completed', 'failed', 'cancelled']);

/**
 * A new run id: `run_` and 128 random bits in base64url (22 characters). Short, because a run's
 * id is in every one of its keys, job ids and events: about 190 times per run of 8 tool calls.
 * It never starts with `run_p`: the queue engine names a run's partition that way (`run_p3_…`),
 * and about one random id in 25,000 would otherwise read as one and be sent to a partition that
 * may not exist.
 */
export function newRunId(): string {
  for (;;) {
    const id = `run_${randomBytes(16).toString('base64url')}`;
    if (!id.startsWith(PARTITIONED_RUN_ID_START)) return id;
  }
}

/**
 * The id of the child run a call of an agent tool starts (SPEC §13): derived from the parent and
 * the call, so every delivery of the call names the same child, and in the parent's partition.
 */
export function childRunId(parent_run_id: string, step_id: string, iteration: number, tool_call_id: string): string {
  const partition = PARTITION_MARK.exec(parent_run_id)?.[0];
  for (let salt = 0; ; salt += 1) {
    const digest = createHash('sha256').update(`${parent_run_id}/${step_id}/${iteration}/${tool_call_id}/${salt}`).digest('base64url').slice(0, 22);
    if (partition) return `${partition}${digest}`;
    const id = `run_${digest}`;
    if (!id.startsWith(PARTITIONED_RUN_ID_START)) return id;
  }
}

/** How a run id that names its partition starts (`run_p3_…`); see {@link newRunId}. */
export const PARTITIONED_RUN_ID_START = 'run_p';

/** The mark of a run id that names its partition: `run_p<k>_`, with `k` (1 to 4 digits) as its group. */
export const PARTITION_MARK = new RegExp(`^${PARTITIONED_RUN_ID_START}(\\d{1,4})_`);
