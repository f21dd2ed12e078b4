import {
  type CallPlace,
  DEFAULT_MAX_STATE_BYTES,
  type ExecuteCall,
  type HandlerOutcome,
  type PlannedCall,
  type RunState,
  type StateChange,
  type ToolDefinition,
  type ToolLogger,
  runHandler,
  settleExecution,
  toolDefinitionHash,
  toolStartedEvent,
} from '@arcflow/core';
import type { Span } from '@opentelemetry/api';
import { recordToolExecution } from '@arcflow/telemetry/metrics';
import { Attr, SpanName } from '@arcflow/telemetry/semconv';
import type { CallStart, RoundCall } from '../records/round-call.ts';
import type { RunStore } from '../runs/run-store.ts';
import type { SizedState } from '../steps/state-log.ts';
import { type JobOrigin, SpanKind, failSpan, recordedTraceparent, startChildSpan, withActiveSpan } from '../tracing.ts';
import type { CancellationListener, WorkCancellation } from '../runs/cancel.ts';
import type { ToolJobData } from '../jobs/jobs.ts';
import type { RoundState } from '../loop/state-join.ts';
import { recordWithinStateLimit } from '../loop/state-limit.ts';

const NO_STATE: RunState = Object.freeze({});
const NO_STATE_SIZE = 2;
const STATE_TOO_LARGE: HandlerOutcome = Object.freeze({ status: 'state_too_large' });

export interface ToolRuntime {
  readonly store: RunStore;
  readonly cancellation: CancellationListener;
  readonly logger: ToolLogger;
}

/** The store's handle on a planned call of a round; `fanned_out` when it runs as its own tool job. */
export function roundCall(planned: PlannedCall, place: CallPlace, fanned_out: boolean, round_waits = false): RoundCall {
  const definition_hash = planned.action === 'execute' ? toolDefinitionHash(planned.tool) : undefined;
  return { step_id: place.step_id, iteration: place.iteration, tool_call_id: planned.call.id, tool_name: planned.call.function.name, definition_hash, fanned_out, round_waits };
}

/** The planned call a tool job stands for, rebuilt from its job data. */
export function callFromJob(data: ToolJobData, tool: ToolDefinition): ExecuteCall {
  return {
    action: 'execute',
    index: data.index,
    call: { id: data.tool_call_id, type: 'function', function: { name: data.tool_name, arguments: '' } },
    signature: '',
    tool,
    args: data.args,
    input_size_bytes: data.input_size_bytes,
  };
}

/** Which attempt at a call this is. */
export interface Attempt {
  readonly number: number;
  /** No attempt follows this one, whatever its outcome. */
  readonly last: boolean;
  /**
   * The first delivery of a tool job: no earlier delivery can have recorded the call, so the
   * handler starts after one read of the run's status, writing nothing first (see {@link attemptToolCall}).
   */
  readonly firstDelivery: boolean;
  /** A tool job's call, counted among its round's open calls; not one run inline by its provider job. */
  readonly fannedOut: boolean;
  /** Calls of its round wait for approval (the tool job's `waits`). */
  readonly roundWaits?: boolean;
  /** The tool job this attempt is a delivery of: the attempt's `execute_tool` span stands for it. */
  readonly job?: JobOrigin;
}

/** What an attempt at a call leaves to do: another attempt, or the join when its round is settled. */
export interface AttemptOutcome {
  readonly retry: boolean;
  /** No call of the round is open any more (this one's result is recorded, by now or before). */
  readonly roundSettled: boolean;
  /** The handler returned `ctx.defer()` (SPEC §20): the call is to wait for its result, with the state changes it made. */
  readonly deferred?: { readonly timeout_ms: number; readonly changes?: readonly StateChange[]; readonly started_at: number };
}

/**
 * One attempt at a call, shared by tool jobs and `legacy_eager`: skipped if a result is already
 * recorded; else `ToolCallStarted`, the handler, and (unless another attempt follows) the result
 * with its terminal event, recorded once.
 *
 * A re-delivery, or a call run inline, first asks the store whether the call is recorded or the
 * run has ended, and writes `ToolCallStarted` in the same step. A tool job's first delivery can
 * find its call recorded only when its run has ended (the end closes open calls), so it reads the
 * run's status and, the run going on, starts its handler: a handler that settles within the tick has its `ToolCallStarted`
 * written together with its result, one Redis step instead of two; a longer one has it written at
 * the end of the tick, and is cancelled if the store answers that the run has ended. Nothing is
 * recorded for a run that has ended, whichever way it went.
 */
export async function attemptToolCall(runtime: ToolRuntime, run_id: string, planned: ExecuteCall, place: CallPlace, attempt: Attempt, round?: RoundState): Promise<AttemptOutcome> {
  const { store, cancellation, logger } = runtime;
  const call = roundCall(planned, place, attempt.fannedOut, attempt.roundWaits === true);
  // Stamped now: a first delivery writes it after the handler has started.
  const started = { event: toolStartedEvent(planned, place, attempt.number), ts: Date.now() };
  // Written at most once per attempt, even when a lost reply makes the client send the write again.
  const once = `start|${place.step_id}|${place.iteration}|${planned.call.id}|${attempt.number}`;
  // A first delivery's call is open unless its run ended after the fan-out (a cancel or a failed
  // step closed the call, and the process that closed it died before it removed the queued job, or
  // the fan-out came just after): one read makes sure before any handler runs.
  const fresh = attempt.firstDelivery && (await store.runGoesOn(run_id));
  if (!fresh) {
    // Already recorded (a re-delivery: its round may still need its join) or the run has ended: nothing to run.
    const start = await store.startToolCall(run_id, call, started, once);
    if (start.status === 'recorded') return { retry: false, roundSettled: start.openInRound === 0 };
    if (start.status === 'ended') return { retry: false, roundSettled: false };
  }
  // The run state the round began with (SPEC §17): read before the handler, whose `ctx.state` is synchronous.
  const state = round && round.entries > 0 ? await store.stateLogs.readSized(run_id, round.log_step ?? place.step_id, round.entries) : undefined;
  const cancel = cancellation.watch(run_id);
  const startedWrite = fresh ? new DeferredStart(() => store.startToolCall(run_id, call, started, once), cancel, logger) : undefined;
  const startedAt = performance.now();
  const span = executeSpan(run_id, planned, place, attempt.job);
  const handlerCall = handlerCallOf(run_id, planned, place, attempt, cancel, logger, state, round);
  try {
    // The handler runs inside the span, so spans it starts nest under `execute_tool`.
    const outcome = await withActiveSpan(span, () => runHandler(planned.tool, handlerCall));
    if (outcome.status === 'deferred' && attempt.fannedOut) {
      // Its ToolCallStarted goes in before its ToolResultRequested; the caller parks the call, and this job ends.
      await startedWrite?.now();
      span.end();
      // The handler's execution, to its defer (the result that comes later is no execution).
      recordToolExecution(planned.tool.name, (performance.now() - startedAt) / 1000);
      return { retry: false, roundSettled: false, deferred: deferral(outcome, startedAt) };
    }
    logHandlerProblem(logger, run_id, planned, place, attempt, outcome);
    // `last` counts handler failures only (BullMQ's attemptsMade, or the inline loop's count), so a
    // delivery lost to a dead worker never uses up a retry.
    if (!attempt.last && outcome.status === 'error') {
      failSpan(span, 'tool_error');
      recordToolExecution(planned.tool.name, (performance.now() - startedAt) / 1000, 'tool_error');
      // The attempt leaves its `ToolCallStarted` in the log before the next one starts.
      await startedWrite?.now();
      return { retry: true, roundSettled: false };
    }
    const handled = { planned, place, outcome, duration_ms: Math.round(performance.now() - startedAt) };
    const extra = { spanTraceparent: recordedTraceparent(span), started: startedWrite?.takeOver() ? started : undefined };
    return await recordResult(store, run_id, call, handled, extra, span, state, round);
  } finally {
    if (span.isRecording()) span.end();
    cancel.release();
  }
}

type Deferred = Extract<HandlerOutcome, { status: 'deferred' }>;

/** The `execute_tool` span of an attempt (and of its tool job, if it has one). */
function executeSpan(run_id: string, planned: ExecuteCall, place: CallPlace, job: JobOrigin | undefined): Span {
  return startChildSpan(
    SpanKind.INTERNAL,
    () => ({
      name: SpanName.executeTool(planned.tool.name),
      attributes: {
        [Attr.operationName]: 'execute_tool',
        [Attr.toolName]: planned.tool.name,
        [Attr.toolCallId]: planned.call.id,
        [Attr.toolType]: 'function',
        [Attr.toolSchemaHash]: planned.tool.input_schema_hash,
        [Attr.toolInputBytes]: planned.input_size_bytes,
        [Attr.runId]: run_id,
        [Attr.stepId]: place.step_id,
        [Attr.iteration]: place.iteration,
      },
    }),
    job,
  );
}

/** What the handler is given: the call, its cancel and logger, and the round's run state if any. */
function handlerCallOf(
  run_id: string,
  planned: ExecuteCall,
  place: CallPlace,
  attempt: Attempt,
  cancel: WorkCancellation,
  logger: ToolLogger,
  state: SizedState | undefined,
  round: RoundState | undefined,
) {
  return {
    run_id,
    step_id: place.step_id,
    iteration: place.iteration,
    tool_call_id: planned.call.id,
    attempt: attempt.number,
    args: planned.args,
    cancel,
    log: logger,
    ...(state ? { state: state.state, state_size: state.size } : {}),
    ...(round ? { max_state_bytes: round.max_state_bytes } : {}),
  };
}

/** The wait a deferred call asks for, with the wall-clock time its handler started. */
function deferral(outcome: Deferred, startedAt: number): NonNullable<AttemptOutcome['deferred']> {
  return {
    timeout_ms: outcome.timeout_ms,
    ...(outcome.changes ? { changes: outcome.changes } : {}),
    started_at: Date.now() - Math.round(performance.now() - startedAt),
  };
}

/** Logs a handler that failed, or one that deferred in a call run inline (where it cannot wait). */
function logHandlerProblem(logger: ToolLogger, run_id: string, planned: ExecuteCall, place: CallPlace, attempt: Attempt, outcome: HandlerOutcome): void {
  const where = { run_id, step_id: place.step_id, iteration: place.iteration, tool_call_id: planned.call.id, tool: planned.tool.name };
  if (outcome.status === 'deferred') {
    logger.error('a handler deferred in a call run inline by its provider job (legacy_eager): ctx.defer needs a tool job (llm_select)', where);
  }
  if (outcome.status === 'error') {
    logger.error('tool handler failed', { ...where, attempt: attempt.number, error: outcome.error });
  }
}

interface HandlerResult {
  readonly planned: ExecuteCall;
  readonly place: CallPlace;
  readonly outcome: HandlerOutcome;
  readonly duration_ms: number;
}

/** Records the attempt's result within the run's state limit, with its metric and span, once. */
async function recordResult(
  store: RunStore,
  run_id: string,
  call: RoundCall,
  handled: HandlerResult,
  extra: Parameters<typeof recordWithinStateLimit>[4],
  span: Span,
  state: SizedState | undefined,
  round: RoundState | undefined,
): Promise<AttemptOutcome> {
  const { planned, place, outcome, duration_ms } = handled;
  const limit = {
    base: state?.state ?? NO_STATE,
    base_size: state?.size ?? NO_STATE_SIZE,
    max_state_bytes: round?.max_state_bytes ?? DEFAULT_MAX_STATE_BYTES,
    tooLarge: () => settleExecution(planned, place, STATE_TOO_LARGE, duration_ms),
  };
  const { recorded, settled } = await recordWithinStateLimit(store, run_id, call, settleExecution(planned, place, outcome, duration_ms), extra, limit);
  recordToolExecution(planned.tool.name, duration_ms / 1000, settled.terminal.kind === 'ToolCallFailed' ? settled.terminal.error_code : undefined);
  if (settled.terminal.kind === 'ToolCallFailed') failSpan(span, settled.terminal.error_code);
  else if (settled.terminal.kind === 'ToolCallCompleted') span.setAttribute(Attr.toolOutputBytes, settled.terminal.output_size_bytes);
  span.end();
  return { retry: false, roundSettled: recorded?.openInRound === 0 };
}

/**
 * The `ToolCallStarted` of a first delivery, written at the end of the tick the handler started
 * in, unless the result is recorded first and takes it over. When the store answers that the
 * call cannot run (the run has ended), the handler is cancelled.
 */
class DeferredStart {
  private written: Promise<void> | undefined;
  private takenOver = false;

  constructor(
    private readonly write: () => Promise<CallStart>,
    private readonly cancel: WorkCancellation,
    private readonly logger: ToolLogger,
  ) {
    process.nextTick(() => {
      if (!this.takenOver) void this.now();
    });
  }

  /** Writes it now, if it is not written or taken over yet. */
  now(): Promise<void> {
    if (this.takenOver) return Promise.resolve();
    this.written ??= this.write().then(
      (start) => {
        if (start.status !== 'run') this.cancel.cancel();
      },
      (error: unknown) => this.logger.warn('writing ToolCallStarted failed', { error }),
    );
    return this.written;
  }

  /** True when the result's write should carry the event: it was not written yet, and now will not be. */
  takeOver(): boolean {
    if (this.written) return false;
    this.takenOver = true;
    return true;
  }
}
