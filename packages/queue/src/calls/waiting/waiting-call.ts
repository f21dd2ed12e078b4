import { type EventDraft, NamePattern } from '@arcflow/core';
import { APPROVAL_TIMEOUT_JOB, WAIT_TIMEOUT_JOB, type WaitKind, type WaitTimeoutData, joinJobData } from '../../jobs/jobs.ts';
import type { Dispatcher } from '../../jobs/dispatcher.ts';
import { JobId } from '../../redis/keys.ts';
import type { RunStore } from '../../runs/run-store.ts';
import type { SettleOutcome, StoredWait, WaitChunk, WaitDecision, WaitingStore } from './waiting-store.ts';

export type { ResultTerms, SettleOutcome, StoredWait, WaitChunk, WaitDecision, WaitKind } from './waiting-store.ts';
export { WaitingStore, waitChunk } from './waiting-store.ts';

/**
 * THE contract of a call that waits holding no worker (SPEC §10, §13, §20). A call that waits is
 *
 * - **parked**, once: its request (with the tool job it stands for) is kept in the run's hash of its
 *   kind, its round counts it among the calls waiting outside, its event is written, and the run
 *   is `waiting` when nothing else of the round is open — off the watchdog's scan until its round's
 *   first timeout is due (`parkCall.lua`, `waitingOrRunning` in the prelude);
 * - **settled**, once, by an answer from outside or by its timeout: the call's result and terminal
 *   event are recorded (or, for an approval, the call goes on to what comes next) and the round's
 *   join is added when the call was its last open one (`settleCall.lua`). Settling again returns
 *   the first settlement and changes nothing;
 * - **timed out** by one delayed job on the run's provider queue ({@link WAIT_TIMEOUT_JOB}, added
 *   with the park), which whichever worker is alive at `expires_at` takes;
 * - **cancelled** with its run: the run's end closes it as any open call of its round
 *   (`ToolCallFailed`, `cancelled`), and its timeout job then finds the run ended.
 *
 * Kinds: `approval` (a person's answer, approvals.ts) and `result` (a result from outside: an
 * external tool's call or a deferred handler's, tool-results.ts). A child run's call (child-runs.ts,
 * parent-call.ts) is settled the same way by its child's end, and has no timeout of its own.
 * What is kept in Redis, and its store, are in waiting-store.ts (which a client reads without BullMQ).
 */

export { APPROVAL_TIMEOUT_JOB, WAIT_TIMEOUT_JOB, type WaitTimeoutData } from '../../jobs/jobs.ts';

/** Whether a provider queue's job is a waiting call's timeout, under either name. */
export function isWaitTimeoutJob(name: string): boolean {
  return name === WAIT_TIMEOUT_JOB || name === APPROVAL_TIMEOUT_JOB;
}

export interface WaitDeps {
  readonly store: RunStore;
  readonly queues: Dispatcher;
}

/**
 * Parks a call and adds its timeout job. A re-delivered park changes nothing (`parkedNow` false,
 * with how the call stands); its timeout job is added again all the same (the id dedupes), so a
 * process that died between the two leaves no call without its timeout.
 */
export async function parkWaitingCall(
  deps: WaitDeps,
  kind: WaitKind,
  request: StoredWait,
  event: EventDraft,
  waits: WaitingStore<unknown>,
  chunk?: WaitChunk,
): Promise<{ parkedNow: true } | { parkedNow: false; status: string } | undefined> {
  const parked = await waits.park(request.tool_job.run_id, request, event, chunk);
  if (!parked) return undefined;
  if (parked.parkedNow || parked.status === 'pending') await addWaitTimeout(deps.queues, kind, request);
  return parked;
}

/** The one timeout job of a waiting call, at its `expires_at`, on its run's provider queue. */
export async function addWaitTimeout(queues: Dispatcher, kind: WaitKind, request: StoredWait): Promise<void> {
  const { run_id, join, trace } = request.tool_job;
  const data: WaitTimeoutData = { run_id, step_id: request.step_id, iteration: request.iteration, tool_call_id: request.tool_call_id, trace, kind };
  const ids = kind === 'approval' ? JobId.approvalTimeout : JobId.resultTimeout;
  await queues.addTimeout(join.queue, data, ids(run_id, request.step_id, request.iteration, request.tool_call_id), Math.max(0, request.expires_at - Date.now()));
}

/**
 * Settles a waiting call with `decide`'s decision (made from its request), once, and adds the
 * round's join when the call closed its round. A timeout (`at`) is for the call it was set for:
 * a later call of the same id (ids may repeat across turns and steps) has its own.
 */
export async function settleWaitingCall<Resolution>(
  deps: WaitDeps,
  waits: WaitingStore<Resolution>,
  run_id: string,
  tool_call_id: string,
  decide: (request: StoredWait) => WaitDecision<Resolution>,
  at?: { readonly step_id: string; readonly iteration: number },
): Promise<SettleOutcome<Resolution>> {
  const request = await waits.get(run_id, tool_call_id);
  if (!request) return { status: 'never_waited' };
  if (at && (request.step_id !== at.step_id || request.iteration !== at.iteration)) return { status: 'never_waited' };
  const decision = decide(request);
  const outcome = await waits.settle(run_id, tool_call_id, decision);
  // An approved call goes on (its tool job, or its wait for a result): only a call closed here can settle its round.
  if (outcome.status === 'settled' && decision.decision !== 'approved' && outcome.openInRound === 0) {
    await deps.queues.join(outcome.request.tool_job.join, joinJobData(outcome.request.tool_job));
  }
  return outcome;
}

/** The data of a timeout job as this engine writes it, or undefined for any other. */
export function waitTimeoutData(data: unknown): (WaitTimeoutData & { readonly kind: WaitKind }) | undefined {
  const value = data as WaitTimeoutData | null;
  if (value === null || typeof value !== 'object') return undefined;
  const { run_id, step_id, iteration, tool_call_id, kind } = value;
  if (typeof run_id !== 'string' || !NamePattern.runId.test(run_id)) return undefined;
  if (typeof tool_call_id !== 'string' || !NamePattern.toolCallId.test(tool_call_id)) return undefined;
  if (typeof step_id !== 'string' || !Number.isSafeInteger(iteration)) return undefined;
  if (kind !== undefined && kind !== 'approval' && kind !== 'result') return undefined;
  return { ...value, kind: kind ?? 'approval' };
}
