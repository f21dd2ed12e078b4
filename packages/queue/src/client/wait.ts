import { RequestError, type RunRecord, TERMINAL_STATUSES } from '@arcflow/core';
import type { Redis } from 'ioredis';
import { duplicateRedis } from '../redis/connect.ts';
import { closeRedis } from '../redis/connection.ts';
import { unknownRun } from '../runs/unknown-run.ts';
import type { ClientContext } from './context.ts';

// Pub/sub wakes waiters at once; the poll only covers a message lost to a reconnect.
const WAIT_POLL_MS = 2_000;
// How long a wait waits for its subscription before its first read (the poll covers the rest).
const SUBSCRIBE_WAIT_MS = 1_000;

/**
 * `client.wait`: runs ending are told on their partition's finished channel (sharded pub/sub),
 * subscribed to on a connection of its own on the first wait in that partition.
 */
export class RunWaiter {
  private subscriber: Redis | undefined;
  /** The partitions' finished channels subscribed to, one per tag, on first wait in it. */
  private readonly subscribed = new Map<string, Promise<unknown>>();
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(private readonly context: Pick<ClientContext, 'redis' | 'store' | 'prefix' | 'reach'>) {}

  /** Resolves when the run ends, or at the timeout with the run as it stands. */
  async wait(run_id: string, options: { timeout_ms?: number }): Promise<RunRecord> {
    const { store, reach } = this.context;
    const timeoutMs = options.timeout_ms ?? 60_000;
    if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0) {
      throw new RequestError('invalid_request', `timeout_ms must be a number of milliseconds >= 0, got ${JSON.stringify(timeoutMs)}`);
    }
    const deadline = Date.now() + timeoutMs;
    // Subscribed before the first read, so a run ending in between still wakes it; bounded, since a
    // subscription waits for Redis to come back (the read below fails in redis_timeout_ms instead).
    let subscribeTimer: NodeJS.Timeout | undefined;
    await Promise.race([this.subscribe(run_id), new Promise((resolve) => (subscribeTimer = setTimeout(resolve, SUBSCRIBE_WAIT_MS)))]);
    clearTimeout(subscribeTimer);
    let wake: () => void = () => {};
    const set = this.waiters.get(run_id) ?? new Set();
    this.waiters.set(run_id, set);
    try {
      for (;;) {
        const woken = new Promise<void>((resolve) => {
          wake = resolve;
          set.add(resolve);
        });
        const run = await reach(() => store.getRun(run_id));
        if (!run) throw unknownRun(run_id, this.context.prefix);
        const left = deadline - Date.now();
        if (TERMINAL_STATUSES.has(run.status) || left <= 0) return run;
        // Pub/sub wakes us at once; the poll covers a missed message.
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([woken, new Promise((resolve) => (timer = setTimeout(resolve, Math.min(WAIT_POLL_MS, left))))]);
        clearTimeout(timer);
        set.delete(wake);
      }
    } finally {
      set.delete(wake);
      if (set.size === 0) this.waiters.delete(run_id);
    }
  }

  async close(): Promise<void> {
    if (this.subscriber) await closeRedis(this.subscriber);
  }

  private subscribe(run_id: string): Promise<unknown> {
    if (!this.subscriber) {
      // Subscriptions wait out a reconnect and are restored after it; `wait` also polls.
      this.subscriber = duplicateRedis(this.context.redis, { enableOfflineQueue: true, maxRetriesPerRequest: null });
      this.subscriber.on('error', () => undefined);
      this.subscriber.on('smessage', (_channel: string, finished: string) => {
        for (const wake of this.waiters.get(finished) ?? []) wake();
      });
    }
    const { keys } = this.context.store;
    const channel = keys.finishedChannelIn(keys.tagOf(run_id));
    let done = this.subscribed.get(channel);
    if (!done) {
      // A subscription that failed is tried again by the next wait; this one polls meanwhile.
      done = this.subscriber.ssubscribe(channel).catch(() => this.subscribed.delete(channel));
      this.subscribed.set(channel, done);
    }
    return done;
  }
}
