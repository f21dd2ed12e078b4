import { ErrorCode, RUN_STEP_ID, type RunError, TERMINAL_STATUSES, type ToolLogger, ToolResultText, childRunId, stepFailedEvent } from '@arcflow/core';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { JobId } from '../redis/keys.ts';
import { type Registry, registeredAttempts } from '../records/registry.ts';
import type { RunStore } from '../runs/run-store.ts';
import type { ThreadStore } from '../threads/thread-store.ts';
import type { StepFrontier } from './watchdog-store.ts';
import { checkWaitingRun } from './waiting-runs.ts';
import { type RunTrace, firstJobCarrier } from '../tracing.ts';
import { endRun, settleParentOf } from '../runs/end-run.ts';
import { stopClosedWork } from '../runs/cancel.ts';
import type { JoinTarget, ProviderJobData } from '../jobs/jobs.ts';
import type { Dispatcher } from '../jobs/dispatcher.ts';
import type { WorkflowScheduler } from '../workflows/workflow-scheduler.ts';
import { CompactionSweep } from '../runs/compaction-sweep.ts';

/** BullMQ states in which a job will still run: it can move its run. */
const LIVE_STATES: ReadonlySet<string> = new Set(['waiting', 'active', 'delayed', 'prioritized', 'waiting-children']);

/** Repairs the watchdog makes to one run before it fails the run as stalled. */
export const MAX_WATCHDOG_REPAIRS = 3;

/** Runs checked per scan; the oldest first. */
const SCAN_BATCH = 100;

const STEP_ID = 's1';

export interface WatchdogDeps {
  readonly store: RunStore;
  readonly redis: Redis;
  readonly queues: Dispatcher;
  /** A run the watchdog fails hands its thread on to the next run at once. */
  readonly threads: ThreadStore;
  readonly registry: Registry;
  readonly logger: ToolLogger;
  readonly worker_id: string;
  /** A run quiet for this long, with nothing queued or running that could move it, is repaired or failed. */
  readonly watchdog_ms: number;
  readonly scheduler: WorkflowScheduler;
}

/** What the watchdog did with a quiet run. */
export type WatchdogVerdict = 'ended' | 'moving' | 'repaired' | 'failed';

/**
 * Finds runs that stopped moving and moves them again. Every run not ended is in the active set,
 * scored by its last write. A run quiet for `watchdog_ms` is looked at: if a job that can move it
 * is queued, delayed or running, it is left alone (a long tool, a provider backing off, an agent
 * whose workers are all down). Otherwise the job its loop needs next is added again (a job lost
 * with Redis data, removed by hand, or failed without settling its run); after
 * {@link MAX_WATCHDOG_REPAIRS} repairs that did not help, the run fails with `stalled`, closing
 * its open calls as `worker_lost`. A run waiting in its thread's line is left alone (the end of
 * the run before it starts it); the thread's active run that never started (the process that made
 * it active died first) is started like any run whose job is missing. Every worker runs one; a lock lets one of them scan at a time.
 * Each scan also trims the run listing indexes to the retention period. Beside the scan, it
 * compacts ended runs whose ending process died before compacting them (`CompactionSweep`).
 */
export class Watchdog {
  private timer: NodeJS.Timeout | undefined;
  private scanning: Promise<void> | undefined;
  private readonly intervalMs: number;
  /** Ended runs left uncompacted, on a shorter round of their own. */
  private readonly compactions: CompactionSweep;

  constructor(private readonly deps: WatchdogDeps) {
    this.intervalMs = Math.max(100, Math.min(Math.floor(deps.watchdog_ms / 2), 30_000));
    this.compactions = new CompactionSweep(deps);
  }

  start(): void {
    this.compactions.start();
    this.timer = setInterval(() => {
      this.scanning ??= this.scanOnce()
        .catch((error: unknown) => this.deps.logger.warn('watchdog scan failed', { error }))
        .finally(() => (this.scanning = undefined));
    }, this.intervalMs);
    this.timer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([this.scanning, this.compactions.close()]);
  }

  /** One scan, if no other worker holds this round's lock. */
  async scanOnce(): Promise<void> {
    const { store, redis, worker_id, watchdog_ms } = this.deps;
    const locked = await redis.set(store.keys.watchdogLock, worker_id, 'PX', this.intervalMs, 'NX');
    if (locked !== 'OK') return;
    const { run_ids, nowMs } = await store.watchdog.staleRuns(watchdog_ms, SCAN_BATCH);
    for (const run_id of run_ids) {
      // One run the watchdog cannot act on (what another process left in Redis) does not stop the scan of the rest.
      await this.check(run_id, nowMs).catch((error: unknown) => this.uncheckable(run_id, nowMs, error));
    }
    const agents = await this.deps.registry.known();
    // The listing indexes would grow with every run if only listings trimmed them.
    await store.trimRunIndexes(agents);
    await this.warnUnservedPartitions(agents);
  }

  /**
   * A run whose check threw (what another process left in Redis): looked at again after another
   * quiet period, and failed as stalled once that has happened more often than repairs are made.
   */
  private async uncheckable(run_id: string, nowMs: number, error: unknown): Promise<void> {
    const { store, logger } = this.deps;
    logger.warn('watchdog could not check a run', { run_id, error });
    try {
      await store.watchdog.markChecked(run_id, nowMs);
      if ((await store.watchdog.countRepair(run_id)) <= MAX_WATCHDOG_REPAIRS) return;
      const workflow = (await this.deps.redis.hexists(store.keys.record(run_id), 'workflow')) === 1;
      const stalled: RunError = {
        code: 'RunStalled',
        error_code: ErrorCode.Stalled,
        message: `run '${run_id}' could not be checked by the watchdog (its stored data is unreadable)`,
      };
      const { ended, closed } = await endRun(
        store,
        run_id,
        {
          outcome: { status: 'failed', error: stalled },
          step_id: workflow ? RUN_STEP_ID : STEP_ID,
          closing: { content: ToolResultText.unavailable(), code: ErrorCode.WorkerLost },
        },
        this.deps,
      );
      if (ended) await stopClosedWork(this.deps.redis, store, this.deps.queues, run_id, closed);
    } catch (failure) {
      logger.warn('watchdog could not fail an unreadable run', { run_id, error: failure });
    }
  }

  /** Says which partitions no live worker of an agent serves (a fleet split by ARCFLOW_SERVE_PARTITIONS with a gap): their runs wait. */
  private async warnUnservedPartitions(agents: readonly string[]): Promise<void> {
    const { count } = await this.deps.store.partitions.read();
    if (count <= 1) return;
    for (const agent of agents) {
      const partitions = await this.deps.registry.unservedPartitions(agent, count);
      if (partitions.length > 0) {
        this.deps.logger.warn('no live worker serves these partitions of an agent: their runs wait until one does (ARCFLOW_SERVE_PARTITIONS)', { agent, partitions });
      }
    }
  }

  /** Looks at one quiet run and acts on it. */
  async check(run_id: string, nowMs: number): Promise<WatchdogVerdict> {
    const { store } = this.deps;
    const head = await store.watchdog.frontier(run_id, STEP_ID);
    if (!head || head.status === 'completed' || head.status === 'failed' || head.status === 'cancelled') {
      // An ended child run whose parent's call is not settled (the process that ended it died first) settles it now; that takes it out of the scan.
      if (head && (await settleParentOf(store, this.deps.queues, run_id, false)) === 'settled') return 'ended';
      await store.watchdog.forgetActive(run_id);
      return 'ended';
    }
    // Its calls wait outside (a person, a result): their answers or timeout jobs are its next moves.
    if (head.status === 'waiting') return checkWaitingRun(this.deps, run_id, nowMs);
    if (head.status === 'queued' && (await this.deps.threads.waitsInLine(run_id))) {
      // Its thread's active run has not ended: that run's end starts it (SPEC §11).
      await store.watchdog.markChecked(run_id, nowMs);
      return 'moving';
    }
    const registration = await this.deps.registry.registration(head.agent);
    if (!registration) return this.fail(run_id, head, [STEP_ID], `no worker has registered agent '${head.agent}' under this prefix`);
    const providerQueue = this.deps.queues.forRun(registration.provider_queue, run_id);
    const graph = registration.workflow;
    const view = graph ? await store.workflows.view(run_id) : undefined;
    // An agent run's one step, or a workflow run's running steps.
    const steps = view ? Object.keys(view.statuses).filter((id) => view.statuses[id] === 'running') : [STEP_ID];
    const frontiers = await Promise.all(steps.map(async (step_id) => ({ step_id, frontier: step_id === STEP_ID ? head : await store.watchdog.frontier(run_id, step_id) })));
    const jobs = frontiers.flatMap(({ step_id, frontier }) => (frontier ? this.candidates(run_id, step_id, frontier, providerQueue) : []));
    const states = await Promise.all(jobs.map(({ queue, id }) => queue.getJobState(id)));
    if (states.some((state) => LIVE_STATES.has(state))) {
      await store.watchdog.markChecked(run_id, nowMs);
      return 'moving';
    }
    const children = await this.checkChildren(run_id, frontiers);
    if (children) {
      await store.watchdog.markChecked(run_id, nowMs);
      return children;
    }
    const repairs = await store.watchdog.countRepair(run_id);
    if (repairs > MAX_WATCHDOG_REPAIRS) {
      return this.fail(
        run_id,
        head,
        steps,
        `run '${run_id}' made no progress for ${this.deps.watchdog_ms} ms with nothing queued to move it, after ${MAX_WATCHDOG_REPAIRS} repairs`,
      );
    }
    // The run's own config.model_fallbacks count too, as at enqueue: each of the step's models gets its tries.
    const config = (await store.getSpec(run_id))?.config;
    for (const { step_id, frontier } of frontiers) {
      if (!frontier) continue;
      await this.repair(run_id, step_id, frontier, { queue: registration.provider_queue, attempts: registeredAttempts(registration, step_id, config) });
      this.deps.logger.warn('watchdog re-added the next job of a run that had stopped', { run_id, step_id, iteration: frontier.next, repair: repairs });
    }
    if (graph && view) {
      // Steps that could start (or a run that could end) after a step was settled by a process that died before moving the run on.
      const queue = { queue: registration.provider_queue, attempts: registration.provider_attempts };
      await this.deps.scheduler.advance({ run_id, graph, queue, targets: registration.model_targets ?? {}, trace: head.trace }, view);
    }
    await store.watchdog.markChecked(run_id, nowMs);
    return 'repaired';
  }

  /**
   * The child runs (SPEC §13) of open calls whose jobs are done: one still going moves the run (a
   * long sub-agent); one that has ended settles its call now (the process that ended it died
   * first). A child whose record names no call it could settle (another process wrote it) counts
   * for nothing: the run is repaired, then failed, as any run that does not move.
   */
  private async checkChildren(run_id: string, frontiers: readonly { step_id: string; frontier: StepFrontier | undefined }[]): Promise<'moving' | 'repaired' | undefined> {
    const ids = frontiers.flatMap(({ step_id, frontier }) => (frontier ? frontier.open.map((call) => childRunId(run_id, step_id, frontier.next, call.tool_call_id)) : []));
    if (ids.length === 0) return undefined;
    const statuses = await Promise.all(ids.map((id) => this.deps.store.status(id)));
    if (statuses.some((status) => status !== undefined && !TERMINAL_STATUSES.has(status))) return 'moving';
    const ended = ids.filter((_, index) => statuses[index] !== undefined);
    let settled = 0;
    for (const child_run_id of ended) if ((await settleParentOf(this.deps.store, this.deps.queues, child_run_id, false)) === 'settled') settled += 1;
    if (settled === 0) return undefined;
    this.deps.logger.warn('watchdog settled calls whose child runs had ended without settling them', { run_id, children: ended });
    return 'repaired';
  }

  /**
   * The jobs that could move a step: the provider job for `next` and the one after it (the join
   * of round `next`), and the tool jobs of round `next`'s open calls.
   */
  private candidates(run_id: string, step_id: string, frontier: StepFrontier, providerQueue: Queue): { queue: Queue; id: string }[] {
    const provider = [frontier.next, frontier.next + 1].map((n) => ({ queue: providerQueue, id: JobId.provider(run_id, step_id, n) }));
    // A call's job is in its run's partition, or under the prefix's tag for a capped tool.
    const tools = frontier.open.flatMap((call) =>
      this.deps.queues.toolQueues(call, run_id).map((queue) => ({ queue, id: JobId.tool(run_id, step_id, frontier.next, call.tool_call_id) })),
    );
    return [...provider, ...tools];
  }

  /**
   * Adds again the provider job a step needs: job `next` while round `next` has open calls (it
   * fans out what is missing; dead tool jobs are removed first so their ids can be used again)
   * or has no response yet (it makes the call); else job `next + 1`, which joins the round.
   */
  private async repair(run_id: string, step_id: string, frontier: StepFrontier, target: JoinTarget): Promise<void> {
    const rerunsNext = !frontier.responded || frontier.open.length > 0;
    for (const call of frontier.open) {
      for (const queue of this.deps.queues.toolQueues(call, run_id)) await this.deps.queues.removeFinished(queue, JobId.tool(run_id, step_id, frontier.next, call.tool_call_id));
    }
    const iteration = rerunsNext ? frontier.next : frontier.next + 1;
    const data: ProviderJobData = { run_id, step_id, iteration, trace: frontier.trace.traceparent ? firstJobCarrier(frontier.trace as RunTrace) : {} };
    await this.deps.queues.readd(target, data);
  }

  private async fail(run_id: string, frontier: StepFrontier, steps: readonly string[], message: string): Promise<WatchdogVerdict> {
    const error: RunError = { code: 'RunStalled', error_code: ErrorCode.Stalled, message };
    const workflow = frontier.workflow !== undefined;
    const { ended, closed } = await endRun(
      this.deps.store,
      run_id,
      {
        outcome: { status: 'failed', error },
        step_id: workflow ? RUN_STEP_ID : STEP_ID,
        events: steps.map((step_id) => ({ event: stepFailedEvent(step_id, error) })),
        closing: { content: ToolResultText.unavailable(), code: ErrorCode.WorkerLost },
        ...(workflow ? { steps: { running: 'failed' as const, skip_reason: 'run_failed' as const } } : {}),
      },
      this.deps,
    );
    if (ended) this.deps.logger.error('watchdog failed a run that made no progress', { run_id, steps, error_code: ErrorCode.Stalled });
    // Handlers still running are told, and child runs of the closed calls are cancelled.
    if (ended) await stopClosedWork(this.deps.redis, this.deps.store, this.deps.queues, run_id, closed);
    return 'failed';
  }
}
