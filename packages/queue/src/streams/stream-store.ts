import { type StreamChunk, readStreamChunk } from '@arcflow/core';
import type { Redis } from 'ioredis';
import { readArchive } from '../records/archive.ts';
import { RUN_KEY_SUFFIX } from '../redis/keys.ts';
import type { StoreContext } from '../store-context.ts';

/**
 * A recorded response's part of the run's stream (see `streamResponse` in
 * `redis/lua/stream.lua`): the attempt, the answer's whole text, the text this
 * attempt has not streamed yet, and its tool calls as `[tool_call_id, tool_name]`.
 */
export interface StreamPart {
  readonly attempt: number;
  readonly text: string;
  readonly pending: string;
  readonly calls: readonly (readonly [string, string])[];
  /** Calls of the response that the loop ends without executing them: each gets its `tool_result` (`failed`) after the `tool_call`s. */
  readonly closed?: readonly string[];
}

/** A stream entry that is not a chunk this version knows: stored state is untrusted. */
export class StreamEntryError extends Error {
  override readonly name = 'StreamEntryError';
}

/** Raw stream entries as ioredis returns them: `[id, [field, value, …]]`. */
type RawEntries = [string, string[]][];

/** The most chunks one read returns. */
const READ_COUNT = 500;

/**
 * A run's stream in Redis (SPEC §12): written by the store's scripts (text batches here, the rest
 * with the writes they belong to), read by offset. Entry ids are `0-<offset>` (`XADD … 0-*`), so
 * reading after offset n is `XRANGE (0-n +` and following is `XREAD BLOCK … 0-<n>`.
 */
export class StreamStore {
  constructor(private readonly context: StoreContext) {}

  /** Appends a batch of a call's text; false when it was dropped (the run ended, the response is recorded, a newer attempt streams). */
  async appendText(run_id: string, step_id: string, iteration: number, attempt: number, text: string): Promise<boolean> {
    return (await this.context.scripts.appendStream([this.context.keys.record(run_id)], [step_id, iteration, attempt, text])) === 1;
  }

  /** The chunks after offset `after`, at most {@link READ_COUNT} of them. */
  async read(run_id: string, after: number): Promise<StreamChunk[]> {
    const { redis, keys } = this.context;
    const entries = (await redis.xrange(keys.run(run_id).stream, `(0-${after}`, '+', 'COUNT', READ_COUNT)) as RawEntries;
    if (entries.length > 0) return chunksOf(entries, after);
    // None after `after`: the stream has no more yet, or the run is compacted (its stream in its archive).
    const archived = (await readArchive(redis, keys, run_id))?.stream(RUN_KEY_SUFFIX.stream) ?? [];
    return chunksOf(archived.slice(after, after + READ_COUNT) as RawEntries, after);
  }

  /** The offset of the stream's last chunk; 0 when it has none. */
  async lastOffset(run_id: string): Promise<number> {
    const { redis, keys } = this.context;
    const entries = (await redis.xrevrange(keys.run(run_id).stream, '+', '-', 'COUNT', 1)) as RawEntries;
    // None: the stream is empty, or the run is compacted (its stream in its archive).
    const id = entries[0]?.[0] ?? (await readArchive(redis, keys, run_id))?.stream(RUN_KEY_SUFFIX.stream).at(-1)?.[0];
    if (id === undefined) return 0;
    const offset = ENTRY_ID.exec(id)?.[1];
    if (offset === undefined) throw new StreamEntryError(`stream entry ${id} is not a chunk this version of arcflow can read`);
    return Number(offset);
  }

  /**
   * The chunks after offset `after`, waiting up to `blockMs` on `reader` (a connection of the
   * caller's own: a blocking read holds it) for the first; empty when none came.
   */
  async follow(reader: Redis, run_id: string, after: number, blockMs: number): Promise<StreamChunk[]> {
    const reply = (await reader.xread('COUNT', READ_COUNT, 'BLOCK', blockMs, 'STREAMS', this.context.keys.run(run_id).stream, `0-${after}`)) as [string, RawEntries][] | null;
    // None came: the run may have been compacted while this read waited (its stream is in its archive now).
    return reply ? chunksOf(reply[0]?.[1] ?? [], after) : this.read(run_id, after);
  }

  /**
   * The chunks of several runs' streams after each one's offset, in one `XREAD` on `reader`:
   * waiting up to `blockMs` for the first entry of any of them (a connection of the caller's own),
   * or without waiting when `blockMs` is undefined. Only the runs that have new chunks are in the
   * answer. On a Redis Cluster every run given must share a hash tag (one slot).
   */
  async followMany(reader: Redis, runs: ReadonlyMap<string, number>, blockMs?: number): Promise<Map<string, StreamChunk[]>> {
    const keys: string[] = [];
    const ids: string[] = [];
    const byKey = new Map<string, string>();
    for (const [run_id, after] of runs) {
      const key = this.context.keys.run(run_id).stream;
      keys.push(key);
      ids.push(`0-${after}`);
      byKey.set(key, run_id);
    }
    const block = blockMs === undefined ? [] : ['BLOCK', blockMs];
    const reply = (await reader.call('XREAD', 'COUNT', READ_COUNT, ...block, 'STREAMS', ...keys, ...ids)) as [string, RawEntries][] | null;
    const chunks = new Map<string, StreamChunk[]>();
    for (const [key, entries] of reply ?? []) {
      const run_id = byKey.get(key);
      if (run_id !== undefined && entries.length > 0) chunks.set(run_id, chunksOf(entries, runs.get(run_id)!));
    }
    return chunks;
  }
}

const ENTRY_ID = /^0-([1-9][0-9]{0,14})$/;

/** Entries read back as chunks (the offset from the entry's id), each checked, in offset order from `after + 1` with no gap. */
function chunksOf(entries: RawEntries, after: number): StreamChunk[] {
  let expected = after + 1;
  return entries.map(([id, fields]) => {
    const offset = ENTRY_ID.exec(id)?.[1];
    let parsed: unknown;
    try {
      parsed = fields[0] === 'c' && typeof fields[1] === 'string' ? JSON.parse(fields[1]) : undefined;
    } catch {
      parsed = undefined;
    }
    const chunk = offset !== undefined && parsed !== null && typeof parsed === 'object' ? readStreamChunk({ ...parsed, offset: Number(offset) }) : undefined;
    if (!chunk) throw new StreamEntryError(`stream entry ${id} is not a chunk this version of arcflow can read`);
    if (chunk.offset !== expected) throw new StreamEntryError(`stream entry ${id} follows offset ${expected - 1}: the stream has a gap`);
    expected += 1;
    return chunk;
  });
}
