import { type CancelWatch, RUN_STEP_ID, type RunStatus, type WorkflowGraph, childRunId, sinkSteps, workflowOutput } from '@arcflow/core';
import type { Redis } from 'ioredis';
import { JobId } from '../redis/keys.ts';
import { closeRedis } from '../redis/connection.ts';
import type { CallQueues } from '../jobs/dispatcher.ts';
import type { RoundCall } from '../records/round-call.ts';
import type { RunEnded, RunEnding } from './ending.ts';
import type { RunStore } from './run-store.ts';
import { endRun, settleParentOf } from './end-run.ts';
import { unknownRun } from './unknown-run.ts';

/** What a cancel takes: the store, the connection every worker is told on, and where closed calls' queued jobs are removed. */
export interface CancelDeps {
  readonly redis: Redis;
  readonly store: RunStore;
  readonly queues: CallQueues;
}

/** An agent run's cancel: its one step (`s1`) ends with it. */
const AGENT_RUN_CANCELLED: RunEnding = { outcome: { status: 'cancelled' }, step_id: 's1' };

/**
 * The one cancel, used by the client (`client.cancel`) and by workers (a child whose parent has
 * ended or is ending): ends the run as cancelled, once; the process whose write ended it stops
 * the run's work (see `stopClosedWork`), and a child run's parent gets its call's result now (SPEC
 * §13): the cancel is the child's failure. Nothing happens for a run that has ended or does not exist.
 */
export async function cancelRun(deps: CancelDeps, run_id: string, ending: RunEnding = AGENT_RUN_CANCELLED): Promise<RunEnded> {
  const outcome = await endRun(deps.store, run_id, ending);
  if (!outcome.ended) return outcome;
  await stopClosedWork(deps.redis, deps.store, deps.queues, run_id, outcome.closed);
  if (outcome.facts?.parent_run_id) await settleParentOf(deps.store, deps.queues, run_id, true);
  return outcome;
}

/** What a cancel asked for by a caller (the client) takes besides `CancelDeps`. */
export interface RequestedCancelDeps extends CancelDeps {
  readonly prefix: string;
  /** A workflow's graph as registered, if it is. */
  workflowGraph(workflow: string): Promise<WorkflowGraph | undefined>;
  /** Hands a thread run's line on to the next run (SPEC §11): a run waiting in the line holds no job until then. */
  startNextOnThread(run_id: string): Promise<void>;
  isThreadRun(run_id: string): Promise<boolean>;
}

/** Cancels a run by its id (`client.cancel`): `unknown_run` for a run not kept; whether this cancel ended it, and its status after. */
export async function cancelRequested(deps: RequestedCancelDeps, run_id: string): Promise<{ cancelled: boolean; status: RunStatus }> {
  const { redis, store } = deps;
  const [status, workflow] = (await redis.hmget(store.keys.record(run_id), 'status', 'workflow')) as [RunStatus | null, string | null];
  if (!status) throw unknownRun(run_id, deps.prefix);
  const ending = workflow ? await cancelledWorkflow(deps, run_id, workflow) : AGENT_RUN_CANCELLED;
  const { ended } = await cancelRun(deps, run_id, ending);
  if (ended && (await deps.isThreadRun(run_id))) await deps.startNextOnThread(run_id);
  return { cancelled: ended, status: (await store.status(run_id)) ?? status };
}

/** A workflow run's cancel: its running steps are cancelled, the rest skipped; its completed sinks are its output. */
async function cancelledWorkflow(deps: RequestedCancelDeps, run_id: string, workflow: string): Promise<RunEnding> {
  const graph = await deps.workflowGraph(workflow);
  const output = graph ? workflowOutput(graph, await deps.store.workflows.outputs(run_id, sinkSteps(graph))) : undefined;
  return {
    outcome: { status: 'cancelled', ...(output !== undefined ? { output } : {}) },
    step_id: RUN_STEP_ID,
    steps: { running: 'cancelled', skip_reason: 'cancelled' },
  };
}

/**
 * After a run was ended with calls still running (a cancel; a `fail_fast` failure): the closed
 * calls' jobs still queued are removed, then every worker is told, so in-flight handlers and
 * provider calls stop (a job already running is locked, stays, and is told by the publish); the
 * closed calls' child runs are cancelled.
 */
export async function stopClosedWork(redis: Redis, store: RunStore, queues: CallQueues, run_id: string, closed: readonly RoundCall[]): Promise<void> {
  // Queued jobs go first: told first, a running handler would stop, free its slot, and let a queued job of the run start before it is removed.
  await Promise.all(closed.map((call) => queues.removeToolJob(call, run_id, JobId.tool(run_id, call.step_id, call.iteration, call.tool_call_id))));
  await redis.publish(store.keys.cancelChannel, run_id);
  await cancelChildren(redis, store, queues, run_id, closed);
}

/**
 * Cancels the child runs the closed calls started (SPEC §13), and theirs in turn. A call's child
 * has an id derived from the call, so no list is kept: a closed call that started none finds
 * no run to end.
 */
async function cancelChildren(redis: Redis, store: RunStore, queues: CallQueues, run_id: string, closed: readonly RoundCall[]): Promise<void> {
  await Promise.all(closed.map((call) => cancelChild(redis, store, queues, childRunId(run_id, call.step_id, call.iteration, call.tool_call_id))));
}

/**
 * Cancels a child run whose parent has ended or is ending, with its own children; nothing when it
 * has ended or does not exist. Its parent's call, closed already, takes nothing; the call's span is
 * emitted, for the child's spans are under it.
 */
export async function cancelChild(redis: Redis, store: RunStore, queues: CallQueues, child_run_id: string): Promise<void> {
  await cancelRun({ redis, store, queues }, child_run_id);
}

/** One piece of work's view of its run's cancellation; `release` it when the work is done. */
export interface WorkCancellation extends CancelWatch {
  /** Tells this work alone that its run has ended (learnt from the store rather than the channel). */
  cancel(): void;
  release(): void;
}

/** How long a worker remembers a cancelled run, so that work of it starting later is cancelled at once. */
const REMEMBER_CANCELLED_MS = 10 * 60_000;
/** At most this many remembered (about 10 MiB); past it the oldest are forgotten first. */
const REMEMBER_CANCELLED_MAX = 100_000;

/**
 * Cancellation across processes: `cancel` publishes the run id; every worker tells the work it
 * has in flight for that run (in-flight handlers and provider calls), and for ten minutes treats
 * work of that run that starts later as cancelled from the start.
 */
export class CancellationListener {
  /** Work in flight here, per run. */
  private readonly runs = new Map<string, Set<InFlight>>();
  /** Runs cancelled in the last REMEMBER_CANCELLED_MS, oldest first, with when the cancel arrived. */
  private readonly cancelledRuns = new Map<string, number>();

  private constructor(private readonly subscriber: Redis) {}

  /** `onCancelled` runs in every worker for every cancelled run (after the local work is told). */
  static async start(subscriber: Redis, channel: string, onCancelled: (run_id: string) => void = () => undefined): Promise<CancellationListener> {
    const listener = new CancellationListener(subscriber);
    subscriber.on('message', (_channel: string, run_id: string) => {
      listener.cancel(run_id);
      onCancelled(run_id);
    });
    await subscriber.subscribe(channel);
    return listener;
  }

  /** Watches `run_id` for the duration of one piece of work. */
  watch(run_id: string): WorkCancellation {
    let work = this.runs.get(run_id);
    if (!work) {
      work = new Set();
      this.runs.set(run_id, work);
    }
    const inFlight = new InFlight(() => {
      work.delete(inFlight);
      if (work.size === 0 && this.runs.get(run_id) === work) this.runs.delete(run_id);
    });
    work.add(inFlight);
    if (this.cancelledRuns.has(run_id)) inFlight.cancel();
    return inFlight;
  }

  /** A signal for APIs that take one (the provider call), aborted when the run is cancelled. */
  signalFor(run_id: string): { signal: AbortSignal; release: () => void } {
    const controller = new AbortController();
    // Released work is no longer tracked, so a later cancel cannot reach this watcher.
    const watched = this.watch(run_id);
    watched.watch(() => controller.abort(new Error('run cancelled')));
    return { signal: controller.signal, release: () => watched.release() };
  }

  private cancel(run_id: string): void {
    this.remember(run_id);
    const work = this.runs.get(run_id);
    if (!work) return;
    this.runs.delete(run_id);
    for (const inFlight of work) inFlight.cancel();
  }

  private remember(run_id: string): void {
    const now = Date.now();
    this.cancelledRuns.delete(run_id);
    this.cancelledRuns.set(run_id, now);
    for (const [old, at] of this.cancelledRuns) {
      if (now - at < REMEMBER_CANCELLED_MS && this.cancelledRuns.size <= REMEMBER_CANCELLED_MAX) break;
      this.cancelledRuns.delete(old);
    }
  }

  async close(): Promise<void> {
    await closeRedis(this.subscriber);
  }
}

class InFlight implements WorkCancellation {
  cancelled = false;
  private readonly watchers: (() => void)[] = [];
  private released = false;

  constructor(private readonly untrack: () => void) {}

  watch(onCancel: () => void): () => void {
    if (this.cancelled) {
      onCancel();
      return () => undefined;
    }
    this.watchers.push(onCancel);
    return () => {
      const at = this.watchers.indexOf(onCancel);
      if (at >= 0) this.watchers.splice(at, 1);
    };
  }

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    for (const onCancel of this.watchers.splice(0)) onCancel();
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.untrack();
  }
}
