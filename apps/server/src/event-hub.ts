import { RUN_TERMINAL_KINDS, type TraceEvent } from '@arcflow/core';
import { type RunStore, StoredFormatError, closeRedis, keysFor } from '@arcflow/queue';
import type { Redis } from 'ioredis';

/** One follower of a run: it has been sent every event up to `sent` (seq). */
interface Follower {
  sent: number;
  readonly deliver: (events: readonly TraceEvent[]) => void;
  /** The run's log cannot be read (another process's write): it never will be, so following ends. */
  readonly fail: (error: Error) => void;
}

/** A followed run: its events read so far (all of them, from seq 1), and who follows it here. */
interface RunTail {
  readonly channel: string;
  readonly events: TraceEvent[];
  readonly followers: Set<Follower>;
  reading: boolean;
  /** A notice came while reading: read again after. */
  again: boolean;
  readonly timer: NodeJS.Timeout;
}

/** How often a followed run is read even without a notice (one lost to a reconnect). */
const SAFETY_READ_MS = 5_000;

/**
 * Live events for every follower in this process at the cost of one follower per run: the store
 * publishes on a run's own channel whenever its events grow; the hub subscribes to the channels of
 * the runs someone follows (one connection for all), reads each run's new events once per notice
 * and hands them to that run's followers. Redis sees a read per run per notice, however many
 * followers there are, and nothing while the runs are quiet.
 */
export class EventHub {
  private readonly tails = new Map<string, RunTail>();
  private readonly byChannel = new Map<string, string>();

  constructor(
    private readonly store: RunStore,
    private readonly subscriber: Redis,
    private readonly onError: (error: unknown) => void,
  ) {
    subscriber.on('smessage', (channel: string) => {
      const run_id = this.byChannel.get(channel);
      if (run_id) this.read(run_id);
    });
  }

  /** Sends `deliver` the run's events after seq `after`, in order and each once, as they come; call the result to stop. */
  follow(run_id: string, after: number, deliver: Follower['deliver'], fail: Follower['fail']): () => void {
    const follower: Follower = { sent: after, deliver, fail };
    let tail = this.tails.get(run_id);
    if (!tail) {
      const channel = keysFor(this.store.prefix).run(run_id).tail;
      tail = { channel, events: [], followers: new Set(), reading: false, again: false, timer: setInterval(() => this.read(run_id), SAFETY_READ_MS) };
      tail.timer.unref();
      this.tails.set(run_id, tail);
      this.byChannel.set(channel, run_id);
      // Subscribed before the first read, so nothing written in between is missed.
      this.subscriber
        .ssubscribe(channel)
        .then(() => this.read(run_id))
        .catch(this.onError);
    } else {
      this.deliverTo(tail, follower);
    }
    tail.followers.add(follower);
    return () => this.unfollow(run_id, follower);
  }

  /** Runs followed here now (for tests and the bench). */
  get followedRuns(): number {
    return this.tails.size;
  }

  async close(): Promise<void> {
    for (const tail of this.tails.values()) clearInterval(tail.timer);
    this.tails.clear();
    await closeRedis(this.subscriber);
  }

  private unfollow(run_id: string, follower: Follower): void {
    const tail = this.tails.get(run_id);
    if (!tail) return;
    tail.followers.delete(follower);
    if (tail.followers.size > 0) return;
    clearInterval(tail.timer);
    this.tails.delete(run_id);
    this.byChannel.delete(tail.channel);
    this.subscriber.sunsubscribe(tail.channel).catch(this.onError);
  }

  private read(run_id: string): void {
    const tail = this.tails.get(run_id);
    if (!tail) return;
    if (tail.reading) {
      tail.again = true;
      return;
    }
    tail.reading = true;
    (async () => {
      do {
        tail.again = false;
        const fresh = await this.store.events(run_id, tail.events.length, tail.events.at(-1)?.ts);
        tail.events.push(...fresh);
        if (fresh.length > 0) for (const follower of tail.followers) this.deliverTo(tail, follower);
      } while (tail.again && this.tails.get(run_id) === tail);
    })()
      .catch((error: unknown) => {
        if (!(error instanceof StoredFormatError)) return this.onError(error);
        for (const follower of [...tail.followers]) {
          this.unfollow(run_id, follower);
          follower.fail(error);
        }
      })
      .finally(() => {
        tail.reading = false;
      });
  }

  private deliverTo(tail: RunTail, follower: Follower): void {
    const fresh = tail.events.slice(follower.sent);
    if (fresh.length === 0) return;
    follower.sent = fresh.at(-1)!.seq;
    follower.deliver(fresh);
  }
}

/** Whether the run's log is complete with these events (its terminal event is among them). */
export function endsRun(events: readonly TraceEvent[]): boolean {
  return events.some((event) => RUN_TERMINAL_KINDS.has(event.kind));
}
