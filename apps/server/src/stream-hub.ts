import { type StreamChunk, TERMINAL_STATUSES } from '@arcflow/core';
import { RequestError } from '@arcflow/core';
import type { RunStore } from '@arcflow/queue';
import { Cluster, type Redis } from 'ioredis';
import { type Feed, StreamFeeds } from './stream-feeds.ts';

export { FAN_SLICE_MS, type StreamViewer } from './stream-feeds.ts';

/** The longest one blocking read waits; each return looks at the status of runs quiet that long. */
export const HUB_BLOCK_MS = 2_000;
/** The blocking read's wait where `CLIENT UNBLOCK` is refused (an ACL): a new run waits at most this long to be read. */
const FALLBACK_BLOCK_MS = 50;
/** How often the streams are read on a Redis Cluster, where one blocking read cannot span slots. */
export const CLUSTER_POLL_MS = 10;
/** After a failed read, the wait before the next. */
const RETRY_MS = 500;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Every SSE client's run stream (SPEC §12, §19) through one reading connection, whatever the
 * number of clients: one blocking `XREAD` over the streams of all the runs followed here, each
 * after the offset read so far, whose entries go to each run's viewers. A viewer first reads what
 * is stored on the command connection (the same read shared by viewers that ask for the same
 * offset at once), then takes the shared reads' chunks after its own offset.
 *
 * A run followed for the first time is added to the read at once: the blocked read is ended
 * with `CLIENT UNBLOCK` from the command connection and made again with the new stream in it
 * (where an ACL refuses `CLIENT UNBLOCK`, the read blocks for at most 50 ms instead). On a
 * Redis Cluster, where one read cannot span slots, the streams are read every 10 ms on the
 * command connection, one read per partition that has followed runs, without blocking.
 */
export class StreamHub extends StreamFeeds {
  private readonly cluster: boolean;
  private reader: Redis | undefined;
  private readerId: number | undefined;
  private looping = false;
  /** A blocking read is in flight; its number. */
  private blocked = false;
  private generation = 0;
  private waking = false;
  private wakeAgain = false;
  private unblockRefused = false;
  /** The last shared read failed (its error was reported). */
  private failing = false;
  /** Ends the loop's wait (no armed feed, or between polls). */
  private rest: (() => void) | undefined;

  constructor(
    private readonly store: RunStore,
    private readonly redis: Redis,
    private readonly openReader: () => Redis,
    private readonly onError: (error: unknown) => void,
  ) {
    super();
    this.cluster = (redis as unknown) instanceof Cluster;
  }

  /** Where the run's stream ends now (0 when it has none). */
  lastOffset(run_id: string): Promise<number> {
    return this.store.streams.lastOffset(run_id);
  }

  override async close(): Promise<void> {
    super.close();
    this.rest?.();
    // Its blocking read would hold a QUIT back for up to a read's length: nothing on it is lost by dropping it.
    this.reader?.disconnect();
  }

  protected readStored(run_id: string, after: number): Promise<StreamChunk[]> {
    return this.store.streams.read(run_id, after);
  }

  /** Reads where the run's stream ends, then adds it to the shared reads. */
  protected async arm(feed: Feed): Promise<void> {
    const last = await this.store.streams.lastOffset(feed.run_id);
    if (this.armed(feed, last)) this.wake();
  }

  protected following(): void {
    this.loop();
  }

  protected released(): void {}

  private loop(): void {
    if (this.looping || this.closed) return;
    this.looping = true;
    void (async () => {
      while (!this.closed && this.feeds.size > 0) {
        const armed = new Map<string, number>();
        for (const feed of this.feeds.values()) if (feed.armed) armed.set(feed.run_id, feed.last);
        if (armed.size === 0) {
          await new Promise<void>((resolve) => {
            this.rest = resolve;
          });
          continue;
        }
        let read: Map<string, StreamChunk[]>;
        try {
          read = this.cluster ? await this.poll(armed) : await this.block(armed);
        } catch (error) {
          if (this.closed) break;
          // Once per outage: while Redis is away every read fails the same way.
          if (!this.failing) this.onError(error);
          this.failing = true;
          await sleep(RETRY_MS);
          continue;
        }
        this.failing = false;
        const fans: Promise<void>[] = [];
        for (const [run_id, chunks] of read) {
          const feed = this.feeds.get(run_id);
          const fanning = feed && this.fan(feed, armed.get(run_id)!, chunks);
          if (fanning) fans.push(fanning);
        }
        this.checkQuiet();
        // What comes meanwhile is read at once after: one read for all of it.
        if (fans.length > 0) await Promise.all(fans);
        if (this.cluster && read.size === 0) await Promise.race([sleep(CLUSTER_POLL_MS), new Promise<void>((resolve) => (this.rest = resolve))]);
      }
      this.rest = undefined;
      this.looping = false;
    })();
  }

  /** One blocking read over every armed run's stream, on the reader's connection. */
  private async block(armed: Map<string, number>): Promise<Map<string, StreamChunk[]>> {
    if (!this.reader) {
      const reader = this.openReader();
      reader.on('ready', () => {
        this.readerId = undefined;
      });
      this.reader = reader;
    }
    this.readerId ??= Number(await this.reader.client('ID'));
    this.generation += 1;
    this.blocked = true;
    try {
      return await this.store.streams.followMany(this.reader, armed, this.unblockRefused ? FALLBACK_BLOCK_MS : HUB_BLOCK_MS);
    } finally {
      this.blocked = false;
    }
  }

  /** One read per partition (hash tag) that has armed runs, without blocking, on the command connection. */
  private async poll(armed: Map<string, number>): Promise<Map<string, StreamChunk[]>> {
    const byTag = new Map<string, Map<string, number>>();
    for (const [run_id, after] of armed) {
      const tag = this.store.keys.tagOf(run_id);
      const group = byTag.get(tag) ?? new Map<string, number>();
      byTag.set(tag, group);
      group.set(run_id, after);
    }
    const reads = await Promise.all([...byTag.values()].map((group) => this.store.streams.followMany(this.redis, group)));
    return new Map(reads.flatMap((read) => [...read]));
  }

  /** A feed was armed: the blocked read is ended, so that the next one has its stream. */
  private wake(): void {
    const rest = this.rest;
    this.rest = undefined;
    rest?.();
    if (this.cluster || this.unblockRefused || !this.blocked) return;
    if (this.waking) {
      this.wakeAgain = true;
      return;
    }
    this.waking = true;
    const generation = this.generation;
    void (async () => {
      // A read sent but not yet blocking in Redis is not unblocked: tried again until it is, or has returned.
      while (this.blocked && this.generation === generation && !this.closed) {
        if ((await this.redis.client('UNBLOCK', this.readerId!)) === 1) return;
        await sleep(1);
      }
    })()
      .catch((error: unknown) => {
        // An ACL that refuses CLIENT UNBLOCK: short blocking reads from now on.
        if (error instanceof Error && /NOPERM|unknown command/i.test(error.message)) this.unblockRefused = true;
        else this.onError(error);
      })
      .finally(() => {
        this.waking = false;
        if (this.wakeAgain) {
          this.wakeAgain = false;
          this.wake();
        }
      });
  }

  /**
   * The status of each run whose stream has been quiet for a blocking read's length: a run that
   * is gone ends its viewers with `unknown_run`; one that has ended with nothing more to read
   * (no `end` chunk: a run from before streams) ends them.
   */
  private checkQuiet(): void {
    const now = performance.now();
    for (const feed of this.feeds.values()) {
      if (!feed.armed || feed.checking || now - feed.heardAt < HUB_BLOCK_MS) continue;
      feed.checking = true;
      void (async () => {
        const status = await this.store.status(feed.run_id);
        if (!status) return this.drop(feed, new RequestError('unknown_run', `unknown run '${feed.run_id}' (its retention may have ended)`));
        if (!TERMINAL_STATUSES.has(status)) return;
        const after = feed.last;
        const rest = await this.store.streams.read(feed.run_id, after);
        if (rest.length === 0) this.drop(feed);
        else await this.fan(feed, after, rest);
      })()
        .catch(this.onError)
        .finally(() => {
          feed.checking = false;
          feed.heardAt = performance.now();
        });
    }
  }
}
