import type { Redis } from 'ioredis';

/**
 * Cancellation across processes: `cancel` publishes the run id; every worker aborts the signals
 * it handed out for that run (in-flight handlers and provider calls).
 */
export class CancellationListener {
  private readonly controllers = new Map<string, Set<AbortController>>();

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
    const controller = new AbortController();
    const set = this.controllers.get(run_id) ?? new Set();
    set.add(controller);
    this.controllers.set(run_id, set);
    return {
      signal: controller.signal,
      release: () => {
        set.delete(controller);
        if (set.size === 0) this.controllers.delete(run_id);
      },
    };
  }

  private abort(run_id: string): void {
    for (const controller of this.controllers.get(run_id) ?? []) controller.abort(new Error('run cancelled'));
  }

  async close(): Promise<void> {
    await this.subscriber.quit().catch(() => undefined);
  }
}
