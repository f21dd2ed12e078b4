import { ToolArgumentError } from '../errors.ts';
import { withFields } from '../logger.ts';
import type { ToolContext, ToolDefinition, ToolLogger } from './define.ts';
import { serialiseResult } from './result-text.ts';

/** How one execution of a handler ended. Exactly one attempt; retries belong to the caller. */
export type HandlerOutcome =
  | { readonly status: 'ok'; readonly text: string }
  | { readonly status: 'invalid_arguments'; readonly message: string }
  | { readonly status: 'timeout' }
  | { readonly status: 'cancelled' }
  | { readonly status: 'error'; readonly error: unknown };

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
}

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
    });
    void execute(tool, call.args, ctx).then(settle);
  });
}

async function execute(tool: ToolDefinition, args: unknown, ctx: ToolContext): Promise<HandlerOutcome> {
  try {
    return { status: 'ok', text: serialiseResult(await tool.handler(args, ctx)) };
  } catch (error) {
    if (error instanceof ToolArgumentError) return { status: 'invalid_arguments', message: error.message };
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
