import { setMaxListeners } from 'node:events';
import type { Redis } from 'ioredis';

/**
 * Cancellation across processes: `cancel` publishes the run id; every worker aborts the signals
 * it handed out for that run (in-flight handlers and provider calls).
 */
export class CancellationListener {
  /** One controller per run with work in flight here, shared by that work and counted. */
  private readonly runs = new Map<string, { controller: AbortController; holders: number }>();

  private constructor(private readonly subscriber: Redis) {}

  /** `onCancelled` runs in every worker for every cancelled run (after the local aborts). */
  static async start(subscriber: Redis, channel: string, onCancelled: (run_id: string) => void = () => undefined): Promise<CancellationListener> {
    const listener = new CancellationListener(subscriber);
    subscriber.on('message', (_channel: string, run_id: string) => {
      listener.abort(run_id);
      onCancelled(run_id);
    });
    await subscriber.subscribe(channel);
    return listener;
  }

  /** A signal aborted when the run is cancelled; call `release` when the work is done. */
  signalFor(run_id: string): { signal: AbortSignal; release: () => void } {
    let entry = this.runs.get(run_id);
    if (!entry) {
      entry = { controller: new AbortController(), holders: 0 };
      // Every handler of the run in this process listens on this one signal: no listener cap.
      setMaxListeners(0, entry.controller.signal);
      this.runs.set(run_id, entry);
    }
    entry.holders += 1;
    const held = entry;
    let released = false;
    return {
      signal: held.controller.signal,
      release: () => {
        if (released) return;
        released = true;
        held.holders -= 1;
        if (held.holders === 0 && this.runs.get(run_id) === held) this.runs.delete(run_id);
      },
    };
  }

  private abort(run_id: string): void {
    const entry = this.runs.get(run_id);
    if (!entry) return;
    // Work that starts after this gets a fresh signal: the run's end is then seen in the store.
    this.runs.delete(run_id);
    entry.controller.abort(new Error('run cancelled'));
  }

  async close(): Promise<void> {
    await this.subscriber.quit().catch(() => undefined);
  }
}
