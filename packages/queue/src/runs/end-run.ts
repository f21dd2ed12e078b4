import type { ToolLogger } from '@arcflow/core';
import { tracingEnabled } from '@arcflow/telemetry/ids';
import type { CallQueues, Dispatcher } from '../jobs/dispatcher.ts';
import { recordRunEnded } from '../metrics/run-ends.ts';
import type { EndedRunFacts, RunEnded, RunEnding } from './ending.ts';
import type { RunStore } from './run-store.ts';
import type { ThreadStore } from '../threads/thread-store.ts';
import type { RunTrace } from '../tracing.ts';
import { startNextOnThread } from '../threads/thread-run.ts';
import { failureFields } from './compaction.ts';

/**
 * What a run's end hands on: the next run of its thread (SPEC §11), whose first job starts now;
 * for a child run, its parent's call, settled now (SPEC §13).
 */
export interface Succession {
  readonly threads: ThreadStore;
  readonly queues: Dispatcher;
  /** Told of a compaction that failed (the sweep compacts the run later). */
  readonly logger?: ToolLogger;
}

/**
 * Ends a run once (see `RunStore.finishRun`); the process whose write ended it emits the run's
 * root span if it traces and, given a `succession`, starts the next run of its thread.
 */
export async function endRun(store: RunStore, run_id: string, ending: RunEnding, succession?: Succession): Promise<RunEnded> {
  const outcome = await store.finishRun(run_id, ending);
  if (!outcome.ended) return outcome;
  recordRunEnded(outcome.facts, ending);
  await runEnded(store, run_id, succession, outcome.facts);
  return outcome;
}

/**
 * What follows the write that ended a run, in the process that made it: its root span, then its
 * compaction (docs/decisions/0031-compaction.md), then what its end hands on.
 */
export async function runEnded(store: RunStore, run_id: string, succession?: Succession, facts?: EndedRunFacts): Promise<void> {
  await emitRunSpanOnce(store, run_id);
  // Compacting saves memory and changes nothing a reader sees: a run it fails on (Redis gone for a
  // moment) stays whole in its running layout until the sweep compacts it, and what its end hands on must not wait on it.
  await store
    .compactRun(run_id)
    .catch((error: unknown) => succession?.logger?.warn('compacting an ended run failed; the compaction sweep retries it', { run_id, ...failureFields(error) }));
  if (!succession) return;
  // Room for the tenant's next run (SPEC §14).
  await succession.queues.limits.release(run_id);
  await startNextOnThread(succession.threads, succession.queues, run_id);
  if (facts?.parent_run_id) await settleParentOf(store, succession.queues, run_id, true);
}

/**
 * Settles the parent's call of an ended child run (see `settleParentCall`; loaded only when a child
 * run ends: most processes never do). `endedHere`: this process's write ended the child.
 */
export async function settleParentOf(store: RunStore, queues: CallQueues, child_run_id: string, endedHere: boolean): Promise<'settled' | 'unreadable'> {
  const { settleParentCall } = await import('../calls/waiting/parent-call.ts');
  return settleParentCall({ store, queues }, child_run_id, endedHere);
}

/**
 * Emits the ended run's root span from this process, if it traces and no other process has:
 * a run cancelled by a backend without tracing still gets its root span from a worker.
 */
export async function emitRunSpanOnce(store: RunStore, run_id: string): Promise<void> {
  if (!tracingEnabled()) return;
  const facts = await store.claimRootSpan(run_id);
  if (!facts?.trace.traceparent) return;
  // Imported here, not at the top: a client that cancels without tracing never loads the OpenTelemetry API.
  const { emitRunSpan } = await import('../tracing.ts');
  emitRunSpan(facts.trace as RunTrace, facts);
}
