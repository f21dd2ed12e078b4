import type { RunStatus } from '@arcflow/core';
import { roundKey, stateKey } from '../redis/keys.ts';
import { type RunSpec, storedTrace } from '../records/run-spec.ts';
import { StoredFormatError } from '../records/formats.ts';
import { readRoundCalls } from '../records/round-calls.ts';
import type { StoreContext } from '../store-context.ts';

/** Where a step's loop stands (see {@link WatchdogStore.frontier}). */
export interface StepFrontier {
  readonly status: RunStatus;
  readonly agent: string;
  /** Set for a workflow run (its workflow's name). */
  readonly workflow?: string;
  readonly trace: RunSpec['trace'];
  /** The iteration whose provider job comes next, or whose response is recorded and being acted on. */
  readonly next: number;
  /** Response `next` is recorded. */
  readonly responded: boolean;
  /** Calls of round `next` fanned out with no result yet. */
  readonly open: readonly { readonly tool_call_id: string; readonly tool_name: string; readonly definition_hash?: string }[];
}

/**
 * The watchdog's view of the runs in Redis: which have made no progress for a while (the active
 * set, scored by last progress, one per partition), and where a quiet step's loop stands.
 */
export class WatchdogStore {
  constructor(
    private readonly context: StoreContext,
    private readonly partitions: { tags(): Promise<string[]> },
  ) {}

  /** Runs not ended whose last progress is older than `ageMs` (by the Redis server's clock), in every partition; and that clock. */
  async staleRuns(ageMs: number, limit: number): Promise<{ run_ids: string[]; nowMs: number }> {
    const [seconds, micros] = await this.context.redis.time();
    const nowMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const found = await Promise.all(
      (await this.partitions.tags()).map((tag) => this.context.redis.zrangebyscore(this.context.keys.activeRunsIn(tag), '-inf', nowMs - ageMs, 'LIMIT', 0, limit)),
    );
    return { run_ids: found.flat().slice(0, limit), nowMs };
  }

  /** Marks a run as checked at `nowMs`, so the watchdog looks at it again only after another quiet period. */
  async markChecked(run_id: string, nowMs: number): Promise<void> {
    await this.context.redis.zadd(this.context.keys.activeRunsIn(this.context.keys.tagOf(run_id)), 'XX', nowMs, run_id);
  }

  /** Drops a run that has ended or is gone from the active set. */
  async forgetActive(run_id: string): Promise<void> {
    await this.context.redis.zrem(this.context.keys.activeRunsIn(this.context.keys.tagOf(run_id)), run_id);
  }

  /** Counts one more watchdog repair of the run; returns how many there have been. */
  async countRepair(run_id: string): Promise<number> {
    return this.context.redis.hincrby(this.context.keys.record(run_id), 'watchdog_repairs', 1);
  }

  /**
   * Where a step's loop stands, for the watchdog: the run's status and agent, the step's stored
   * iterations (-1 before its first save), whether response `iterations + 1` is recorded, and the
   * calls of that response's round still open (fanned out, no result yet).
   */
  async frontier(run_id: string, step_id: string): Promise<StepFrontier | undefined> {
    const record = this.context.keys.record(run_id);
    const [status, agent, trace, workflow] = await this.context.redis.hmget(record, 'status', 'agent', 'trace', 'workflow');
    if (!status) return undefined;
    // A run's record that cannot be read is not a run that ended: the watchdog keeps it until it fails it (see `Watchdog.uncheckable`).
    if (agent == null) throw new StoredFormatError(`agent of run ${run_id}`, 'missing');
    const stored = await this.context.redis.hget(stateKey(record, step_id), 'iterations');
    const iterations = stored === null ? -1 : Number(stored);
    if (!Number.isSafeInteger(iterations) || iterations < -1) throw new StoredFormatError(`iterations of ${run_id}/${step_id}`, 'malformed');
    const next = Math.max(iterations, 0) + 1;
    const [response, open, calls, results] = await Promise.all([
      this.context.redis.exists(roundKey(record, step_id, 'response', next)),
      this.context.redis.hget(this.context.keys.run(run_id).pending, `${step_id}|${next}`),
      this.context.redis.hget(this.context.keys.run(run_id).pending, `${step_id}|${next}|calls`),
      this.context.redis.hkeys(roundKey(record, step_id, 'results', next)),
    ]);
    const recorded = new Set(results);
    const roundCalls = Number(open ?? 0) > 0 && calls ? readRoundCalls(calls) : [];
    if (!roundCalls) throw new StoredFormatError(`calls of round ${step_id}|${next} of ${run_id}`, 'malformed');
    return {
      status: status as RunStatus,
      agent,
      ...(workflow ? { workflow } : {}),
      trace: storedTrace(trace),
      next,
      responded: response === 1,
      open: roundCalls
        .filter(([id]) => !recorded.has(id))
        .map(([tool_call_id, tool_name, definition_hash]) => ({ tool_call_id, tool_name, ...(definition_hash ? { definition_hash } : {}) })),
    };
  }
}
