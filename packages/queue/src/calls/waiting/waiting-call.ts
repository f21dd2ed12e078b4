import type { EventDraft, PendingApproval, SettledCall } from '@arcflow/core';
import { NamePattern } from '@arcflow/core';
import type { JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { type ToolJobData, type TraceCarrier, joinJobData } from '../../jobs/jobs.ts';
import { type QueuePool, enqueueJoin } from '../../loop/join.ts';
import { JobId, type Keys } from '../../redis/keys.ts';
import type { RunStore } from '../../runs/run-store.ts';
import type { StoreScripts } from '../../scripts.ts';

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
 */
export type WaitKind = 'approval' | 'result';

/** The delayed job that times a waiting call out: one job kind for every kind of wait. */
export const WAIT_TIMEOUT_JOB = 'call-timeout';
/** The name approval timeouts were added under before there was more than one kind: still taken. */
export const APPROVAL_TIMEOUT_JOB = 'approval-timeout';

/** Whether a provider queue's job is a waiting call's timeout, under either name. */
export function isWaitTimeoutJob(name: string): boolean {
  return name === WAIT_TIMEOUT_JOB || name === APPROVAL_TIMEOUT_JOB;
}

export interface WaitTimeoutData {
  readonly run_id: string;
  readonly step_id: string;
  readonly iteration: number;
  readonly tool_call_id: string;
  readonly trace: TraceCarrier;
  /** Absent in jobs added before results from outside existed: an approval's. */
  readonly kind?: WaitKind;
}

/** What a wait for a result needs to know of its tool, kept with the request (the answering process has no tool definitions). */
export interface ResultTerms {
  readonly timeout_ms: number;
  readonly max_result_bytes: number;
  readonly input_schema_hash: string;
  readonly output_schema?: unknown;
}

/** A waiting call's request as kept: what answerers see, and the tool job it stands for. */
export interface StoredWait extends PendingApproval {
  readonly tool_job: ToolJobData;
  readonly tool_job_options: JobsOptions;
  /** The tool has a `concurrency` cap: its jobs go to the one queue under the prefix's tag. */
  readonly tool_capped?: boolean;
  /** An external tool's call (its approval, then its result), or a deferred call: how it waits for its result. */
  readonly result?: ResultTerms;
  /** When the call started (a deferred call: before its handler ran), for its duration. */
  readonly started_at?: number;
  /** A deferred handler's run-state changes (SPEC §17), kept with the result if it completes. */
  readonly changes?: readonly unknown[];
}

/** What a parked call adds to its run's stream (SPEC §12, §20), without its offset. */
export type WaitChunk =
  | { readonly type: 'tool_approval'; readonly step_id: string; readonly iteration: number; readonly tool_call_id: string; readonly tool_name: string }
  | { readonly type: 'tool_input'; readonly step_id: string; readonly iteration: number; readonly tool_call_id: string; readonly tool_name: string; readonly input: unknown };

/** A waiting call's stream chunk of `type`, from its request. */
export function waitChunk(type: 'tool_approval' | 'tool_input', request: StoredWait): WaitChunk {
  const { step_id, iteration, tool_call_id, tool_name } = request;
  return type === 'tool_approval' ? { type, step_id, iteration, tool_call_id, tool_name } : { type, step_id, iteration, tool_call_id, tool_name, input: request.arguments };
}

/** What settling writes: the decision, its record, and (unless the call goes on) its result and terminal event. */
export interface WaitDecision<Resolution> {
  readonly decision: 'approved' | 'rejected' | 'timed_out' | 'answered';
  readonly resolution: Resolution;
  readonly resolved?: EventDraft;
  readonly result?: SettledCall;
}

/** How settling went: settled now (with the round's open calls left), before, too late (the run ended), or never parked. */
export type SettleOutcome<Resolution> =
  | { readonly status: 'settled'; readonly resolution: Resolution; readonly request: StoredWait; readonly openInRound: number }
  | { readonly status: 'settled_before'; readonly resolution: Resolution; readonly request: StoredWait; readonly decision: string }
  | { readonly status: 'run_ended'; readonly request: StoredWait }
  | { readonly status: 'never_waited' };

interface EventCodec {
  eventJson(event: EventDraft, ts?: number): string;
}

/** Waiting calls of one kind, in Redis (`parkCall`, `settleCall`: each writes once). */
export class WaitingStore<Resolution> {
  constructor(
    private readonly kind: WaitKind,
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly scripts: StoreScripts,
    private readonly codec: EventCodec,
  ) {}

  private hash(run_id: string): string {
    const keys = this.keys.run(run_id);
    return this.kind === 'approval' ? keys.approvals : keys.toolResults;
  }

  /**
   * Parks a call. `status` is how it stands when it was parked before (or `closed` when it has its
   * result already), `conflict` when another call of the run waits under its id; undefined when
   * the run has ended.
   */
  async park(run_id: string, request: StoredWait, event: EventDraft, chunk?: WaitChunk): Promise<{ parkedNow: true } | { parkedNow: false; status: string } | undefined> {
    const [outcome, status] = (await this.scripts.parkCall([this.keys.record(run_id)], {
      kind: this.kind,
      step_id: request.step_id,
      iteration: request.iteration,
      tool_call_id: request.tool_call_id,
      request: JSON.stringify(request),
      event: this.codec.eventJson(event),
      expires_at: request.expires_at,
      chunk: chunk ? JSON.stringify(chunk) : '',
    })) as [number, string?];
    if (outcome === -1) return undefined;
    if (outcome === -2) return { parkedNow: false, status: 'conflict' };
    return outcome === 1 ? { parkedNow: true } : { parkedNow: false, status: status ?? 'pending' };
  }

  async settle(run_id: string, tool_call_id: string, decision: WaitDecision<Resolution>): Promise<SettleOutcome<Resolution>> {
    const terminal = decision.result?.terminal;
    const [outcome, first, second, third] = (await this.scripts.settleCall([this.keys.record(run_id)], {
      kind: this.kind,
      tool_call_id,
      decision: decision.decision,
      resolution: JSON.stringify(decision.resolution),
      resolved: decision.resolved ? this.codec.eventJson(decision.resolved) : '',
      content: decision.result?.content ?? '',
      terminal: terminal ? this.codec.eventJson(terminal) : '',
      code: (terminal as { error_code?: string } | undefined)?.error_code ?? '',
      changes: decision.result?.changes ? JSON.stringify(decision.result.changes) : '',
    })) as [number, (string | number)?, string?, string?];
    switch (outcome) {
      case 1:
        return { status: 'settled', resolution: decision.resolution, request: JSON.parse(first as string) as StoredWait, openInRound: Number(second ?? 0) };
      case 0:
        return { status: 'settled_before', resolution: JSON.parse(first as string) as Resolution, request: JSON.parse(second as string) as StoredWait, decision: third ?? '' };
      case -1:
        return { status: 'run_ended', request: JSON.parse(first as string) as StoredWait };
      default:
        return { status: 'never_waited' };
    }
  }

  /** A call's request, if it ever waited for this in this run. */
  async get(run_id: string, tool_call_id: string): Promise<StoredWait | undefined> {
    const json = await this.redis.hget(this.hash(run_id), tool_call_id);
    return json ? (JSON.parse(json) as StoredWait) : undefined;
  }

  /** How a call's wait stands (pending, or how it was settled), if it ever waited at this place. */
  async statusAt(run_id: string, tool_call_id: string, place: { step_id: string; iteration: number }): Promise<string | undefined> {
    const [at, status] = await this.redis.hmget(this.hash(run_id), `${tool_call_id}|place`, `${tool_call_id}|status`);
    return at === `${place.step_id}|${place.iteration}` ? (status ?? undefined) : undefined;
  }

  /** The run's calls waiting now, oldest request first. */
  async pending(run_id: string): Promise<PendingApproval[]> {
    return (await this.pendingRequests(run_id)).map(({ step_id, iteration, tool_call_id, tool_name, arguments: args, requested_at, expires_at }) => ({
      step_id,
      iteration,
      tool_call_id,
      tool_name,
      arguments: args,
      requested_at,
      expires_at,
    }));
  }

  /** The run's calls waiting now, as kept (with their tool jobs), oldest request first. */
  async pendingRequests(run_id: string): Promise<StoredWait[]> {
    const fields = await this.redis.hgetall(this.hash(run_id));
    const waiting: StoredWait[] = [];
    for (const [field, value] of Object.entries(fields)) {
      if (field.includes('|') || fields[`${field}|status`] !== 'pending') continue;
      waiting.push(JSON.parse(value) as StoredWait);
    }
    return waiting.sort((a, b) => a.requested_at - b.requested_at);
  }
}

export interface WaitDeps {
  readonly store: RunStore;
  readonly queues: QueuePool;
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
export async function addWaitTimeout(queues: QueuePool, kind: WaitKind, request: StoredWait): Promise<void> {
  const { run_id, join, trace } = request.tool_job;
  const data: WaitTimeoutData = { run_id, step_id: request.step_id, iteration: request.iteration, tool_call_id: request.tool_call_id, trace, kind };
  const ids = kind === 'approval' ? JobId.approvalTimeout : JobId.resultTimeout;
  await queues.forRun(join.queue, run_id).add(WAIT_TIMEOUT_JOB, data, {
    jobId: ids(run_id, request.step_id, request.iteration, request.tool_call_id),
    delay: Math.max(0, request.expires_at - Date.now()),
  });
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
    await enqueueJoin(deps.queues, outcome.request.tool_job.join, joinJobData(outcome.request.tool_job));
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
