import { RequestError, type RunStatus, type StreamChunk, TERMINAL_STATUSES } from '@arcflow/core';
import type { Redis } from 'ioredis';
import type { StreamStore } from './stream-store.ts';
import { unknownRun } from '../runs/unknown-run.ts';

/** Options of `client.stream`. */
export interface StreamOptions {
  /** Chunks after this offset (default 0: from the start). */
  readonly after?: number;
}

/** What following a run's stream needs from the client. */
export interface StreamFollowing {
  readonly streams: StreamStore;
  /** A connection of the reader's own (a blocking read holds it), closed when the reader stops. */
  readonly openReader: () => Redis;
  readonly closeReader: (reader: Redis) => Promise<void>;
  /** Runs an operation on a connection as the client does: waits out a short outage, then fails clearly. */
  readonly reach: <T>(reader: Redis, operation: () => Promise<T>) => Promise<T>;
  readonly status: (run_id: string) => Promise<RunStatus | undefined>;
  /** How long one blocking read waits before the run's status is looked at. */
  readonly blockMs: number;
  /** The key prefix, named when the run is not there. */
  readonly prefix: string;
}

/** `after` as a whole offset, else a clear error. */
export function checkAfter(after: unknown): number {
  if (after === undefined) return 0;
  if (typeof after !== 'number' || !Number.isSafeInteger(after) || after < 0) {
    throw new RequestError('invalid_request', `after must be a whole number >= 0 (an offset of the run's stream), got ${JSON.stringify(after)?.slice(0, 40)}`);
  }
  return after;
}

/**
 * A run's chunks after `after`, following the run until its `end` chunk (SPEC §12): what is
 * stored already is read at once, then blocking reads wait for more. A run that has ended with
 * nothing after `after` (its `end` read already, or a run from before streams, which has none)
 * ends the iteration at once.
 */
export async function* followStream(following: StreamFollowing, run_id: string, after: number): AsyncGenerator<StreamChunk> {
  const { streams, reach, status, blockMs } = following;
  const reader = following.openReader();
  try {
    const first = await reach(reader, () => status(run_id));
    if (!first) throw unknownRun(run_id, following.prefix);
    // What is there already comes at once, without a blocking read; an ended run ends here.
    let last = after;
    for (;;) {
      const chunks = await reach(reader, () => streams.read(run_id, last));
      for (const chunk of chunks) {
        yield chunk;
        last = chunk.offset;
        if (chunk.type === 'end') return;
      }
      if (chunks.length === 0) break;
    }
    if (TERMINAL_STATUSES.has(first)) return;
    for (;;) {
      const chunks = await reach(reader, () => streams.follow(reader, run_id, last, blockMs));
      for (const chunk of chunks) {
        yield chunk;
        last = chunk.offset;
        if (chunk.type === 'end') return;
      }
      if (chunks.length > 0) continue;
      const now = await reach(reader, () => status(run_id));
      if (!now) throw new RequestError('unknown_run', `unknown run '${run_id}' (its retention may have ended)`);
      if (TERMINAL_STATUSES.has(now) && (await reach(reader, () => streams.read(run_id, last))).length === 0) return;
    }
  } finally {
    await following.closeReader(reader);
  }
}
