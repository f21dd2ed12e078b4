import { JobId } from '../redis/keys.ts';
import type { RunStore } from '../runs/run-store.ts';
import type { Dispatcher } from '../jobs/dispatcher.ts';
import { addWaitTimeout } from '../calls/waiting/waiting-call.ts';
import type { StoredWait, WaitKind } from '../calls/waiting/waiting-store.ts';

/**
 * A waiting run the watchdog met (SPEC §20: a run whose every open call waits outside is not its
 * to scan until one settles or times out). A run waits off the scan, scored at its round's first
 * timeout; it is met only once that is due (or it was parked by an earlier version). Its calls'
 * timeout jobs that should have fired by now are added again (a job removed by hand; the id
 * dedupes one still delayed), and it is parked again at its next timeout.
 */
export async function checkWaitingRun(deps: { readonly store: RunStore; readonly queues: Dispatcher }, run_id: string, nowMs: number): Promise<'moving' | 'repaired'> {
  const { store } = deps;
  const waiting: { kind: WaitKind; request: StoredWait }[] = [
    ...(await store.approvals.pendingRequests(run_id)).map((request) => ({ kind: 'approval' as const, request })),
    ...(await store.toolResults.pendingRequests(run_id)).map((request) => ({ kind: 'result' as const, request })),
  ];
  const next = Math.min(...waiting.filter(({ request }) => request.expires_at > nowMs).map(({ request }) => request.expires_at));
  const overdue = waiting.filter(({ request }) => request.expires_at <= nowMs);
  for (const { kind, request } of overdue) {
    const queue = deps.queues.forRun(request.tool_job.join.queue, run_id);
    const ids = kind === 'approval' ? JobId.approvalTimeout : JobId.resultTimeout;
    await deps.queues.removeFinished(queue, ids(run_id, request.step_id, request.iteration, request.tool_call_id));
    await addWaitTimeout(deps.queues, kind, request);
  }
  // Overdue calls: looked at again after another quiet period; else off the scan until the next timeout is due.
  await store.watchdog.markChecked(run_id, overdue.length > 0 || !Number.isFinite(next) ? nowMs : next);
  return overdue.length > 0 ? 'repaired' : 'moving';
}
