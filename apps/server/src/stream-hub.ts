import { type StreamChunk, TERMINAL_STATUSES } from '@arcflow/core';
import { RequestError } from '@arcflow/core';
import type { RunStore } from '@arcflow/queue';
import { Cluster, type Redis } from 'ioredis';

/** Someone here reading a run's stream (an SSE client). */
export interface StreamViewer {
  /** The next chunks, in offset order, each once. */
  readonly deliver: (chunks: readonly StreamChunk[]) => void;
  /** Resolves when the viewer can take more (its socket drained); what is stored is read no faster. */
  readonly drained: () => Promise<void>;
  /** The stream will not go on: the run ended without an `end` chunk (`undefined`), or an error (the run is gone, Redis failed). */
  readonly finish: (error?: unknown) => void;
}

interface Viewer extends StreamViewer {
  /** Every chunk up to this offset has been delivered. */
  sent: number;
  /** Reading what is stored, on its own: chunks read for the run meanwhile are not for it. */
  catching: boolean;
  stopped: boolean;
  /** The run had ended when the viewer came: an empty read after its last chunk is the end. */
  readonly ended: boolean;
}

/** A run whose stream is followed here. */
interface Feed {
  readonly run_id: string;
  /** The offset the shared reads go on after, once `armed`. */
  last: number;
  armed: boolean;
  /** Settles once the feed is armed or dropped; undefined until arming starts. */
  ready: Promise<void> | undefined;
  readonly viewers: Set<Viewer>;
  /** When its stream last grew or its status was looked at. */
  heardAt: number;
  checking: boolean;
  /** A fan-out of its chunks under way (in slices); the next waits for it. */
  fanning: Promise<void> | undefined;
}

/** The longest one blocking read waits; each return looks at the status of runs quiet that long. */
export const HUB_BLOCK_MS = 2_000;
/** The blocking read's wait where `CLIENT UNBLOCK` is refused (an ACL): a new run waits at most this long to be read. */
const FALLBACK_BLOCK_MS = 50;
/** How often the streams are read on a Redis Cluster, where one blocking read cannot span slots. */
export const CLUSTER_POLL_MS = 10;
/** After a failed read, the wait before the next. */
const RETRY_MS = 500;

/** The longest a fan-out holds the event loop before it lets other work in (the rest of its viewers after a `setImmediate`). */
export const FAN_SLICE_MS = 8;

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
export class StreamHub {
  private readonly feeds = new Map<string, Feed>();
  /** Reads of stored chunks in flight, by `run_id after`, which viewers that ask the same share. */
  private readonly reads = new Map<string, Promise<StreamChunk[]>>();
  private readonly cluster: boolean;
  private reader: Redis | undefined;
  private readerId: number | undefined;
  private looping = false;
  private closed = false;
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
    this.cluster = (redis as unknown) instanceof Cluster;
  }

  /**
   * Sends `viewer` the run's chunks after offset `after`, in order and each once, as they come;
   * call the result to stop. `ended`: the run had ended when asked (what is stored is all).
   */
  follow(run_id: string, after: number, viewer: StreamViewer, ended = false): () => void {
    const entry: Viewer = { ...viewer, sent: after, catching: false, stopped: false, ended };
    let feed = this.feeds.get(run_id);
    if (!feed) {
      feed = { run_id, last: 0, armed: false, ready: undefined, viewers: new Set(), heardAt: performance.now(), checking: false, fanning: undefined };
      this.feeds.set(run_id, feed);
    }
    // A run that had ended when its first viewer came is read by its viewers alone; a live one joins the shared reads.
    if (!ended) feed.ready ??= this.arm(feed);
    feed.viewers.add(entry);
    void this.catchUp(feed, entry);
    this.loop();
    return () => this.stop(feed, entry);
  }

  /** The run's stored chunks after `after` (at most a read's worth), shared with viewers reading the same at once. */
  read(run_id: string, after: number): Promise<StreamChunk[]> {
    const key = `${run_id} ${after}`;
    let read = this.reads.get(key);
    if (!read) {
      read = this.store.streams.read(run_id, after).finally(() => this.reads.delete(key));
      this.reads.set(key, read);
    }
    return read;
  }

  /** Runs followed here now, and viewers (for tests and the bench). */
  get followed(): { runs: number; viewers: number } {
    let viewers = 0;
    for (const feed of this.feeds.values()) viewers += feed.viewers.size;
    return { runs: this.feeds.size, viewers };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const feed of this.feeds.values()) for (const viewer of feed.viewers) this.stop(feed, viewer);
    this.rest?.();
    // Its blocking read would hold a QUIT back for up to a read's length: nothing on it is lost by dropping it.
    this.reader?.disconnect();
  }

  /** Reads where the run's stream ends, then adds it to the shared reads. */
  private arm(feed: Feed): Promise<void> {
    return this.store.streams.lastOffset(feed.run_id).then(
      (last) => {
        if (this.feeds.get(feed.run_id) !== feed) return;
        feed.last = last;
        feed.armed = true;
        this.wake();
      },
      (error: unknown) => this.drop(feed, error),
    );
  }

  /** A viewer reads what is stored after its offset, until it is where the shared reads are. */
  private async catchUp(feed: Feed, viewer: Viewer): Promise<void> {
    viewer.catching = true;
    try {
      for (;;) {
        const chunks = await this.read(feed.run_id, viewer.sent);
        if (viewer.stopped) return;
        const fresh = chunks.filter((chunk) => chunk.offset > viewer.sent);
        // One chunk at a time, each once the viewer's socket has taken the last: what is stored goes at the client's pace.
        for (const chunk of fresh) {
          viewer.sent = chunk.offset;
          viewer.deliver([chunk]);
          if (viewer.stopped) return;
          await viewer.drained();
          if (viewer.stopped) return;
        }
        if (fresh.length > 0) continue;
        if (viewer.ended) return viewer.finish();
        // Not armed yet: what the arming finds may be after this read; read until it is known.
        if (!feed.armed) {
          await feed.ready;
          if (viewer.stopped || !feed.armed) return;
        }
        if (viewer.sent >= feed.last) return;
      }
    } catch (error) {
      if (!viewer.stopped) viewer.finish(error);
    } finally {
      viewer.catching = false;
    }
  }

  private stop(feed: Feed, viewer: Viewer): void {
    viewer.stopped = true;
    feed.viewers.delete(viewer);
    if (feed.viewers.size === 0 && this.feeds.get(feed.run_id) === feed) this.feeds.delete(feed.run_id);
  }

  /** Ends every viewer of the feed (its run is gone, or it could not be read). */
  private drop(feed: Feed, error?: unknown): void {
    if (this.feeds.get(feed.run_id) === feed) this.feeds.delete(feed.run_id);
    for (const viewer of feed.viewers) {
      viewer.stopped = true;
      viewer.finish(error);
    }
    feed.viewers.clear();
  }

  /**
   * Chunks the shared read found after `after` for the run: to each viewer that is where they
   * start, in the order the viewers came. The first viewers get them at once; past
   * `FAN_SLICE_MS`, the rest follow after a `setImmediate`, so other clients' requests and the
   * heartbeats are not held up by one chunk's fan-out to many thousands. The next chunks of the
   * run wait for it; settles once every viewer has been given them.
   */
  private fan(run_id: string, after: number, chunks: readonly StreamChunk[]): Promise<void> | undefined {
    const feed = this.feeds.get(run_id);
    if (!feed || feed.last !== after || chunks.length === 0) return undefined;
    feed.last = chunks.at(-1)!.offset;
    feed.heardAt = performance.now();
    const deliver = () =>
      new Promise<void>((resolve) => {
        // A live iteration: a viewer that leaves meanwhile is passed over, one that comes meanwhile catches up on its own.
        const viewers = feed.viewers.values();
        const slice = () => {
          if (this.deliverSlice(feed, viewers, chunks)) resolve();
          else setImmediate(slice);
        };
        slice();
      });
    const fanning = feed.fanning ? feed.fanning.then(deliver) : deliver();
    feed.fanning = fanning;
    void fanning.then(() => {
      if (feed.fanning === fanning) feed.fanning = undefined;
    });
    return fanning;
  }

  /** Gives the chunks to the next viewers for at most `FAN_SLICE_MS`; whether every viewer has had them. */
  private deliverSlice(feed: Feed, viewers: Iterator<Viewer>, chunks: readonly StreamChunk[]): boolean {
    const first = chunks[0]!.offset;
    const until = performance.now() + FAN_SLICE_MS;
    for (let count = 1; ; count += 1) {
      const next = viewers.next();
      if (next.done) return true;
      const viewer = next.value;
      if (viewer.catching || viewer.stopped) continue;
      if (viewer.sent + 1 < first) {
        void this.catchUp(feed, viewer);
        continue;
      }
      const fresh = viewer.sent + 1 === first ? chunks : chunks.slice(viewer.sent + 1 - first);
      if (fresh.length === 0) continue;
      viewer.sent = fresh.at(-1)!.offset;
      viewer.deliver(fresh);
      // The clock is read every 64 viewers: reading it costs about as much as a viewer.
      if ((count & 63) === 0 && performance.now() > until) return false;
    }
  }

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
          const fanning = this.fan(run_id, armed.get(run_id)!, chunks);
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
        else await this.fan(feed.run_id, after, rest);
      })()
        .catch(this.onError)
        .finally(() => {
          feed.checking = false;
          feed.heardAt = performance.now();
        });
    }
  }
}
