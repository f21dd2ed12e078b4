import type { ChatMessage, StepState } from '@arcflow/core';
import type { Redis } from 'ioredis';
import { readArchive } from '../records/archive.ts';
import { type Keys, threadKeys, transcriptKey } from '../redis/keys.ts';
import { type StoredState, StoredFormatError, ownMessages, readMessage } from '../records/formats.ts';
import { TranscriptCache } from './transcript-cache.ts';

/** The thread conversation a run began on (SPEC §11): its thread's first `count` messages. */
export interface ThreadPlace {
  readonly thread_id: string;
  /** The thread's first run: tells the thread from an earlier, deleted one of the same id. */
  readonly origin: string;
  readonly count: number;
}

/** A state as formats 4 and 5 store it: its messages in its step's transcript list. */
export type ListedState = Extract<StoredState, { kind: 'listed' }>;

/**
 * The messages of steps' states, as the store keeps them (SPEC §11, "append-only"): each step's
 * transcript list, appended to by every save with what it adds, and for a run that began on a
 * thread, the thread's own list, which its states name (`earlier`) instead of copying. Both lists'
 * first messages never change, so this worker keeps what it read or wrote lately and asks Redis
 * only for the rest.
 */
export class Transcripts {
  private readonly cache = new TranscriptCache();

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  /** How many of a step's transcript list this worker holds (what a read may skip). */
  cachedCount(run_id: string, step_id: string): number {
    return this.cache.get(TranscriptCache.step(run_id, step_id)).length;
  }

  /**
   * A listed state with its messages: the list's first `from` from the cache, then `tail` (the
   * list from `from` on), with the thread's messages it began on put back in their place. What was
   * read is cached. A list that does not hold the state's messages is unreadable.
   */
  async withMessages(run_id: string, step_id: string, stored: ListedState, from: number, tail: readonly string[], thread: ThreadPlace | undefined): Promise<StepState> {
    const what = `transcript of ${run_id}/${step_id}`;
    if (from + tail.length < stored.messages) throw new StoredFormatError(what, 'malformed');
    const key = TranscriptCache.step(run_id, step_id);
    const head = this.cache.get(key).slice(0, from);
    if (head.length < from) throw new StoredFormatError(what, 'malformed');
    const listed = head.concat(tail.slice(0, stored.messages - from).map((line, at) => readMessage(line, `${what}[${from + at}]`)));
    this.cache.set(key, listed, byteLength(tail));
    const { earlier } = stored.state;
    if (!earlier) return { ...stored.state, messages: listed } as StepState;
    if (thread?.count !== earlier.count) throw new StoredFormatError(`thread messages of ${run_id}`, 'missing');
    const messages = [...listed.slice(0, earlier.at), ...(await this.threadMessages(run_id, thread)), ...listed.slice(earlier.at)];
    return { ...stored.state, messages } as StepState;
  }

  /**
   * A step's own conversation, for readers outside the loop (`client.messages`): the stored
   * state's messages but the thread's it began on (those stay with the thread), read whole from the
   * list and left out of the cache, which is the loop's.
   */
  async conversation(run_id: string, step_id: string, stored: StoredState): Promise<ChatMessage[]> {
    if (stored.kind === 'inline') return [...ownMessages(stored.state)];
    if (stored.messages === 0) return [];
    const what = `transcript of ${run_id}/${step_id}`;
    const lines = await this.lines(run_id, step_id, 0, stored.messages - 1);
    if (lines.length < stored.messages) throw new StoredFormatError(what, 'malformed');
    return lines.map((line, at) => readMessage(line, `${what}[${at}]`));
  }

  /** A listed state with its messages, reading from Redis what this worker lacks of its list. */
  async load(run_id: string, step_id: string, stored: ListedState, thread: ThreadPlace | undefined): Promise<StepState> {
    const from = Math.min(this.cachedCount(run_id, step_id), stored.messages);
    const tail = from < stored.messages ? await this.lines(run_id, step_id, from, stored.messages - 1) : [];
    return this.withMessages(run_id, step_id, stored, from, tail, thread);
  }

  /** Messages `from` to `to` of a step's transcript list, from the run's archive once it is compacted. */
  private async lines(run_id: string, step_id: string, from: number, to: number): Promise<string[]> {
    const lines = await this.redis.lrange(this.keys.run(run_id).transcript(step_id), from, to);
    if (lines.length > 0) return lines;
    const archived = (await readArchive(this.redis, this.keys, run_id))?.list(transcriptKey('', step_id)) ?? [];
    return archived.slice(from, to + 1);
  }

  /**
   * What a save of `state` sends: where in the step's list its new messages begin (`from`: the
   * list holds those before, as far as this worker knows) and their JSON. `first`: the step's first
   * save, when the list holds nothing.
   */
  toSave(run_id: string, state: StepState, first: boolean): { readonly count: number; readonly from: number; readonly added: string[] } {
    const own = ownMessages(state);
    const from = first ? 0 : Math.min(this.cachedCount(run_id, state.step_id), own.length);
    return { count: own.length, from, added: own.slice(from).map((message) => JSON.stringify(message)) };
  }

  /** Notes a save that stood: the step's list now holds the state's own messages. */
  saved(run_id: string, state: StepState, added: readonly string[]): void {
    this.cache.set(TranscriptCache.step(run_id, state.step_id), ownMessages(state), byteLength(added));
  }

  /** The first `count` messages of the thread a run began on, reading only those this worker lacks. */
  async threadMessages(run_id: string, thread: ThreadPlace): Promise<ChatMessage[]> {
    const list = threadKeys(this.keys.tagOf(run_id), thread.thread_id).messages;
    const key = TranscriptCache.thread(list, thread.origin);
    const cached = this.cache.get(key);
    if (cached.length >= thread.count) return cached.slice(0, thread.count);
    const tail = await this.redis.lrange(list, cached.length, thread.count - 1);
    const what = `thread ${thread.thread_id}`;
    if (cached.length + tail.length < thread.count) throw new StoredFormatError(`${what}'s first ${thread.count} messages`, 'missing');
    const messages = cached.concat(tail.map((line, at) => readMessage(line, `${what}[${cached.length + at}]`)));
    this.cache.set(key, messages, byteLength(tail));
    return messages;
  }
}

/** The bytes of some JSON texts (as the transcript cache counts them). */
export function byteLength(lines: readonly string[]): number {
  return lines.reduce((sum, line) => sum + Buffer.byteLength(line), 0);
}
