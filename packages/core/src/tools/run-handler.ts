import { ToolArgumentError } from '../errors.ts';
import type { ToolContext, ToolDefinition, ToolLogger } from './define.ts';
import { serialiseResult } from './result-text.ts';

/** How one execution of a handler ended. Exactly one attempt; retries belong to the caller. */
export type HandlerOutcome =
  | { readonly status: 'ok'; readonly text: string }
  | { readonly status: 'invalid_arguments'; readonly message: string }
  | { readonly status: 'timeout' }
  | { readonly status: 'cancelled' }
  | { readonly status: 'error'; readonly error: unknown };

export interface HandlerCall {
  readonly run_id: string;
  readonly step_id: string;
  readonly iteration: number;
  readonly tool_call_id: string;
  readonly attempt: number;
  readonly args: unknown;
  /** Aborted when the run is cancelled. */
  readonly cancelSignal?: AbortSignal;
  readonly log: ToolLogger;
}

/** The idempotency key of a tool call, stable across every retry and re-delivery. */
export function idempotencyKey(call: Pick<HandlerCall, 'run_id' | 'step_id' | 'iteration' | 'tool_call_id'>): string {
  return `${call.run_id}:${call.step_id}:${call.iteration}:${call.tool_call_id}`;
}

/**
 * Runs a tool's handler once under its timeout. The handler's `ctx.signal` aborts on timeout or
 * cancellation; the outcome is settled at that moment even if the handler ignores the signal.
 */
export async function runHandler(tool: ToolDefinition, call: HandlerCall): Promise<HandlerOutcome> {
  if (call.cancelSignal?.aborted) return { status: 'cancelled' };
  const signal = lazySignal();
  let settle!: (outcome: HandlerOutcome) => void;
  const stopped = new Promise<HandlerOutcome>((resolve) => (settle = resolve));
  const timer = setTimeout(() => {
    signal.abort(new Error('tool timed out'));
    settle({ status: 'timeout' });
  }, tool.timeout_ms);
  const onCancel = () => {
    signal.abort(new Error('run cancelled'));
    settle({ status: 'cancelled' });
  };
  call.cancelSignal?.addEventListener('abort', onCancel, { once: true });

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
    log: call.log,
  });
  const executed = (async (): Promise<HandlerOutcome> => {
    try {
      return { status: 'ok', text: serialiseResult(await tool.handler(call.args, ctx)) };
    } catch (error) {
      if (error instanceof ToolArgumentError) return { status: 'invalid_arguments', message: error.message };
      return { status: 'error', error };
    }
  })();
  try {
    return await Promise.race([executed, stopped]);
  } finally {
    clearTimeout(timer);
    call.cancelSignal?.removeEventListener('abort', onCancel);
  }
}

/**
 * The handler's `ctx.signal`, made only if the handler reads it (most never do, and an
 * AbortController is among the costliest objects on a tool call's path). Aborting before the
 * first read makes the signal already aborted, with the same reason.
 */
function lazySignal(): { get(): AbortSignal; abort(reason: Error): void } {
  let controller: AbortController | undefined;
  let reason: Error | undefined;
  return {
    get() {
      if (!controller) {
        controller = new AbortController();
        if (reason) controller.abort(reason);
      }
      return controller.signal;
    },
    abort(why) {
      if (reason) return;
      reason = why;
      controller?.abort(why);
    },
  };
}
