import type { RunError } from '@arcflow/core';
import { tracingEnabled } from '@arcflow/telemetry/ids';
import type { PendingEvent, RunStore } from '../store/run-store.ts';
import { type RunTrace, emitRunSpan } from '../tracing.ts';

export type RunOutcome = { status: 'completed'; output: string } | { status: 'failed'; error: RunError } | { status: 'cancelled' };

/**
 * Ends a run once (see `RunStore.finishRun`); the process whose write ended it emits the run's
 * root span. Returns false if the run had already ended.
 */
export async function endRun(store: RunStore, run_id: string, outcome: RunOutcome, step_id: string, events: readonly PendingEvent[] = []): Promise<boolean> {
  const ended = await store.finishRun(run_id, outcome, step_id, events);
  if (ended && tracingEnabled()) {
    const [run, spec] = await Promise.all([store.getRun(run_id), store.getSpec(run_id)]);
    if (run && spec?.trace.traceparent) {
      emitRunSpan(spec.trace as RunTrace, {
        run_id,
        agent: spec.agent,
        created_at: run.created_at,
        status: run.status,
        usage: run.usage,
        error_code: run.error?.error_code,
      });
    }
  }
  return ended;
}
