import type { StreamChunk } from '@arcflow/core';

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
export interface Feed {
  readonly run_id: string;
  /** The offset the live chunks go on after, once `armed`. */
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

/** The longest a fan-out holds the event loop before it lets other work in (the rest of its viewers after a `setImmediate`). */
export const FAN_SLICE_MS = 8;

/**
 * The viewers of each followed run and how a run's chunks reach them: a viewer first reads what
 * is stored (the same read shared by viewers that ask for the same offset at once), one chunk at
 * a time as its socket drains, then takes the live chunks after its own offset, each chunk given
 * to every viewer of its run in 8 ms slices. Where what is stored and the live chunks come from is
 * the subclass's: Redis for `StreamHub`, the primary process for a child of `serve --processes`.
 */
export abstract class StreamFeeds {
  protected readonly feeds = new Map<string, Feed>();
  /** Reads of stored chunks in flight, by `run_id after`, which viewers that ask the same share. */
  private readonly reads = new Map<string, Promise<StreamChunk[]>>();
  protected closed = false;

  /** The run's stored chunks after `after` (at most a read's worth). */
  protected abstract readStored(run_id: string, after: number): Promise<StreamChunk[]>;
  /** Finds where the run's live chunks start and calls `armed(feed, last)` (or throws: the feed is dropped). */
  protected abstract arm(feed: Feed): Promise<void>;
  /** A viewer came (the hub starts its read). */
  protected abstract following(): void;
  /** The feed's last viewer left; it is followed no more. */
  protected abstract released(feed: Feed): void;

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
    if (!ended) feed.ready ??= this.arm(feed).catch((error: unknown) => this.drop(feed, error));
    feed.viewers.add(entry);
    void this.catchUp(feed, entry);
    this.following();
    return () => this.stop(feed, entry);
  }

  /** The run's stored chunks after `after` (at most a read's worth), shared with viewers reading the same at once. */
  read(run_id: string, after: number): Promise<StreamChunk[]> {
    const key = `${run_id} ${after}`;
    let read = this.reads.get(key);
    if (!read) {
      read = this.readStored(run_id, after).finally(() => this.reads.delete(key));
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

  /** Stops every viewer. */
  close(): void {
    this.closed = true;
    for (const feed of this.feeds.values()) for (const viewer of feed.viewers) this.stop(feed, viewer);
  }

  /** The feed's live chunks go on after `last`, if it is still followed. */
  protected armed(feed: Feed, last: number): boolean {
    if (this.feeds.get(feed.run_id) !== feed) return false;
    feed.last = last;
    feed.armed = true;
    return true;
  }

  /** Ends every viewer of the feed (its run is gone, or it could not be read). */
  protected drop(feed: Feed, error?: unknown): void {
    if (this.feeds.get(feed.run_id) === feed) this.feeds.delete(feed.run_id);
    for (const viewer of feed.viewers) {
      viewer.stopped = true;
      viewer.finish(error);
    }
    feed.viewers.clear();
  }

  /**
   * Live chunks of the feed after `after`: to each viewer that is where they start, in the order
   * the viewers came. The first viewers get them at once; past `FAN_SLICE_MS`, the rest follow
   * after a `setImmediate`, so other clients' requests and the heartbeats are not held up by one
   * chunk's fan-out to many thousands. The next chunks of the run wait for it; settles once every
   * viewer has been given them.
   */
  protected fan(feed: Feed, after: number, chunks: readonly StreamChunk[]): Promise<void> | undefined {
    if (this.feeds.get(feed.run_id) !== feed || feed.last !== after || chunks.length === 0) return undefined;
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

  /** A viewer reads what is stored after its offset, until it is where the live chunks are. */
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
    if (feed.viewers.size === 0 && this.feeds.get(feed.run_id) === feed) {
      this.feeds.delete(feed.run_id);
      this.released(feed);
    }
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
}
