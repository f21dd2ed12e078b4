import { type RunState, type StateChange, applyStateChanges, readStateChanges, stateSize } from '@arcflow/core';
import type { Redis } from 'ioredis';
import { readArchive } from '../records/archive.ts';
import { type Keys, stateLogKey } from '../redis/keys.ts';
import { StoredFormatError } from '../records/formats.ts';

/** Steps whose state this worker keeps, at most. */
const MAX_CACHED = 1_000;

/** A state and the size of its JSON (kept together, so a change's size is worked out, not written out). */
export interface SizedState {
  readonly state: RunState;
  readonly size: number;
}

const EMPTY: SizedState = Object.freeze({ state: Object.freeze({}), size: 2 });

/**
 * A run's state as the store keeps it (SPEC §17): per step, a list of recorded changes (`stateLogKey`:
 * the initial state, then each round that changed it), only appended to. A state is the first
 * `count` entries applied in order; this worker keeps the states it read or made lately and reads
 * only the entries after them.
 */
export class StateLogs {
  private readonly cache = new Map<string, { readonly count: number } & SizedState>();

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  /** The state after the step's first `count` entries; `{}` for none. */
  async read(run_id: string, step_id: string, count: number): Promise<RunState> {
    return (await this.readSized(run_id, step_id, count)).state;
  }

  /** {@link read}, with the size of the state's JSON. */
  async readSized(run_id: string, step_id: string, count: number): Promise<SizedState> {
    if (count === 0) return EMPTY;
    const key = `${run_id}/${step_id}`;
    const cached = this.cache.get(key);
    if (cached?.count === count) return cached;
    const from = cached && cached.count < count ? cached.count : 0;
    const lines = await this.entries(run_id, step_id, from, count - 1);
    if (from + lines.length < count) throw new StoredFormatError(`state log of ${run_id}/${step_id}`, 'missing');
    const state = foldEntries(from > 0 ? cached!.state : {}, lines, from, `state log of ${run_id}/${step_id}`);
    const sized = { state, size: stateSize(state) };
    this.remember(run_id, step_id, count, sized);
    return sized;
  }

  /** The state of the step's whole log but the entries at `left_out` (entry indexes), applied in order. */
  async readWithout(run_id: string, step_id: string, left_out: ReadonlySet<number>): Promise<RunState> {
    const what = `state log of ${run_id}/${step_id}`;
    const lines = await this.entries(run_id, step_id, 0, -1);
    return lines.reduce<RunState>((state, line, at) => (left_out.has(at) ? state : applyStateChanges(state, parseEntry(line, `${what}[${at}]`)).state), {});
  }

  /** How many entries the step's state log holds. */
  async length(run_id: string, step_id: string): Promise<number> {
    const length = await this.redis.llen(this.keys.run(run_id).stateLog(step_id));
    return length > 0 ? length : (await this.archived(run_id, step_id)).length;
  }

  /** The changes of the step's entries from `from` on, in order, as one list. */
  async changesSince(run_id: string, step_id: string, from: number): Promise<StateChange[]> {
    const lines = await this.entries(run_id, step_id, from, -1);
    return lines.flatMap((line, at) => parseEntry(line, `state log of ${run_id}/${step_id}[${from + at}]`));
  }

  /** Entries `from` to `to` (-1: the last) of a step's state log, from the run's archive once it is compacted. */
  async entries(run_id: string, step_id: string, from: number, to: number): Promise<string[]> {
    const lines = await this.redis.lrange(this.keys.run(run_id).stateLog(step_id), from, to);
    if (lines.length > 0) return lines;
    return (await this.archived(run_id, step_id)).slice(from, to === -1 ? undefined : to + 1);
  }

  private async archived(run_id: string, step_id: string): Promise<readonly string[]> {
    return (await readArchive(this.redis, this.keys, run_id))?.list(stateLogKey('', step_id)) ?? [];
  }

  /** Notes the state after the step's first `count` entries (made here, by a save that stood). */
  remember(run_id: string, step_id: string, count: number, sized: SizedState): void {
    const key = `${run_id}/${step_id}`;
    this.cache.delete(key);
    if (this.cache.size >= MAX_CACHED) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(key, { count, state: sized.state, size: sized.size });
  }
}

/** `state` with a state log's entries applied in order; `from` is the first one's place in the log (for errors), `what` names the log. */
export function foldEntries(state: RunState, lines: readonly string[], from: number, what: string): RunState {
  return lines.reduce<RunState>((folded, line, at) => applyStateChanges(folded, parseEntry(line, `${what}[${from + at}]`)).state, state);
}

/** One entry of a state log: a list of changes (untrusted, as anything read from Redis). */
export function parseEntry(line: string, what: string): StateChange[] {
  try {
    return readStateChanges(line, what);
  } catch {
    throw new StoredFormatError(what, 'malformed');
  }
}
