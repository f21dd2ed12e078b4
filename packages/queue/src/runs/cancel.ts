import type { CancelWatch } from '@arcflow/core';
import type { Redis } from 'ioredis';
import { closeRedis } from '../redis/connection.ts';

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
