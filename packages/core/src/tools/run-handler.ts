import { ToolAnswerError, ToolArgumentError } from '../errors.ts';
import { withFields } from '../logger.ts';
import { DEFERRED, type DeferredResult, type ToolContext, type ToolDefinition, type ToolLogger, isDeferred, resultTimeoutMs } from './define.ts';
import { serialiseResult } from './result-text.ts';
import { CallState, DEFAULT_MAX_STATE_BYTES, type RunState, type StateChange, applyStateChangesSized, stateSize } from '../state/run-state.ts';

/** How one execution of a handler ended. Exactly one attempt; retries belong to the caller. */
export type HandlerOutcome =
  /** `changes`: what the handler changed in the run's state (SPEC §17), when it changed anything. */
  | { readonly status: 'ok'; readonly text: string; readonly changes?: readonly StateChange[] }
  /** The handler's state changes would take the run's state over its `max_state_bytes`: none apply. */
  | { readonly status: 'state_too_large' }
  | { readonly status: 'invalid_arguments'; readonly message: string }
  /** The tool answered with a failure (`ToolAnswerError`): what it said goes to the model; never retried. */
  | { readonly status: 'answered_error'; readonly message: string }
  | { readonly status: 'timeout' }
  | { readonly status: 'cancelled' }
  | { readonly status: 'error'; readonly error: unknown }
  /** The handler returned `ctx.defer()` (SPEC §20): the call waits for its result from outside, at most `timeout_ms`; `changes` are kept for it. */
  | { readonly status: 'deferred'; readonly timeout_ms: number; readonly changes?: readonly StateChange[] };

/**
 * How a handler learns that its run was cancelled: checked before it starts, then watched while
 * it runs. Plain callbacks rather than an AbortSignal per call: a signal and its listeners are
 * among the costliest objects on a tool call's path, and most calls are never cancelled.
 */
export interface CancelWatch {
  readonly cancelled: boolean;
  /** Calls `onCancel` (once) when the run is cancelled; the returned function stops watching. */
  watch(onCancel: () => void): () => void;
}

/** A {@link CancelWatch} over an AbortSignal (the in-process runner's `signal` option). */
export function watchSignal(signal: AbortSignal): CancelWatch {
  return {
    get cancelled() {
      return signal.aborted;
    },
    watch(onCancel) {
      signal.addEventListener('abort', onCancel, { once: true });
      return () => signal.removeEventListener('abort', onCancel);
    },
  };
}

export interface HandlerCall {
  readonly run_id: string;
  readonly step_id: string;
  readonly iteration: number;
  readonly tool_call_id: string;
  readonly attempt: number;
  readonly args: unknown;
  /** Tells when the run is cancelled. */
  readonly cancel?: CancelWatch;
  /** The worker's log; the handler's `ctx.log` adds the call's ids to every line. */
  readonly log: ToolLogger;
  /** The run's state as the call's round began (SPEC §17); none: `{}`. */
  readonly state?: RunState;
  /** The size of `state`'s JSON, when known (else it is written out once to learn it). */
  readonly state_size?: number;
  /** The most the state's JSON may take after this call's changes. */
  readonly max_state_bytes?: number;
}

const NO_STATE: RunState = Object.freeze({});

/** The idempotency key of a tool call, stable across every retry and re-delivery. */
export function idempotencyKey(call: Pick<HandlerCall, 'run_id' | 'step_id' | 'iteration' | 'tool_call_id'>): string {
  return `${call.run_id}:${call.step_id}:${call.iteration}:${call.tool_call_id}`;
}

const TIMED_OUT: HandlerOutcome = Object.freeze({ status: 'timeout' });
const CANCELLED: HandlerOutcome = Object.freeze({ status: 'cancelled' });

/**
 * Runs a tool's handler once under its timeout. The handler's `ctx.signal` aborts on timeout or
 * cancellation; the outcome is settled at that moment even if the handler ignores the signal.
 */
export function runHandler(tool: ToolDefinition, call: HandlerCall): Promise<HandlerOutcome> {
  if (call.cancel?.cancelled) return Promise.resolve(CANCELLED);
  return new Promise<HandlerOutcome>((resolve) => {
    const signal = new LazySignal();
    let callLog: ToolLogger | undefined;
    let callState: CallState | undefined;
    let settled = false;
    let stopWatching: (() => void) | undefined;
    const settle = (outcome: HandlerOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      stopWatching?.();
      resolve(outcome);
    };
    const timer = setTimeout(() => {
      signal.abort(new Error('tool timed out'));
      settle(TIMED_OUT);
    }, tool.timeout_ms);
    stopWatching = call.cancel?.watch(() => {
      signal.abort(new Error('run cancelled'));
      settle(CANCELLED);
    });
    const ctx: ToolContext = Object.freeze({
      run_id: call.run_id,
      step_id: call.step_id,
      iteration: call.iteration,
      tool_call_id: call.tool_call_id,
      attempt: call.attempt,
      idempotency_key: idempotencyKey(call),
      get signal() {
        return signal.get();
      },
      // Made on first use: most handlers never log.
      get log() {
        callLog ??= withFields(call.log, { run_id: call.run_id, step_id: call.step_id, iteration: call.iteration, tool_call_id: call.tool_call_id, tool: tool.name });
        return callLog;
      },
      get state() {
        callState ??= new CallState(call.state ?? NO_STATE);
        return callState;
      },
      defer: (options?: { readonly timeout_ms?: number }) => deferral(tool, options),
    });
    void execute(tool, call.args, ctx).then((outcome) => settle(withStateChanges(outcome, call, callState)));
  });
}

/** What `ctx.defer()` returns; a bad `timeout_ms` throws in the handler (a tool error). */
function deferral(tool: ToolDefinition, options: { readonly timeout_ms?: number } | undefined): DeferredResult {
  const timeout_ms = resultTimeoutMs(`tool '${tool.name}': ctx.defer timeout_ms`, options?.timeout_ms ?? tool.result_timeout_ms);
  return Object.freeze({ [DEFERRED]: true as const, timeout_ms });
}

/** A completed (or deferred) call's outcome with its state changes, or `state_too_large` when they would take the state over its limit. */
function withStateChanges(outcome: HandlerOutcome, call: HandlerCall, callState: CallState | undefined): HandlerOutcome {
  if ((outcome.status !== 'ok' && outcome.status !== 'deferred') || !callState || callState.changes.length === 0) return outcome;
  const base = call.state ?? NO_STATE;
  const after = applyStateChangesSized(base, call.state_size ?? stateSize(base), callState.changes);
  if (after.size > (call.max_state_bytes ?? DEFAULT_MAX_STATE_BYTES)) return { status: 'state_too_large' };
  return { ...outcome, changes: callState.changes };
}

async function execute(tool: ToolDefinition, args: unknown, ctx: ToolContext): Promise<HandlerOutcome> {
  try {
    // An external tool's calls are never executed (they wait for a result from outside): only tools with a handler get here.
    const value = await tool.handler!(args, ctx);
    if (isDeferred(value)) return { status: 'deferred', timeout_ms: value.timeout_ms };
    return { status: 'ok', text: serialiseResult(value) };
  } catch (error) {
    if (error instanceof ToolArgumentError) return { status: 'invalid_arguments', message: error.message };
    if (error instanceof ToolAnswerError) return { status: 'answered_error', message: error.message };
    return { status: 'error', error };
  }
}

/**
 * The handler's `ctx.signal`, made only if the handler reads it (most never do). Aborting before
 * the first read makes the signal already aborted, with the same reason.
 */
class LazySignal {
  private controller: AbortController | undefined;
  private reason: Error | undefined;

  get(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.reason) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  abort(reason: Error): void {
    if (this.reason) return;
    this.reason = reason;
    this.controller?.abort(reason);
  }
}
