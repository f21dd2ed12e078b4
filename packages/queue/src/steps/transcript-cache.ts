import type { ChatMessage } from '@arcflow/core';

/** The transcript cache's bounds: lists kept, and the message bytes (JSON) kept across them. */
export const TRANSCRIPT_CACHE_DEFAULTS = Object.freeze({ maxLists: 1_000, maxBytes: 64 * 1024 * 1024 });

interface Entry {
  messages: ChatMessage[];
  sizeBytes: number;
}

/**
 * The message lists a worker has read or written lately: the first messages of a step's transcript
 * list, or of a thread's messages, which never change once written (the lists are only appended
 * to, and only by a write that commits them). A read asks Redis for the messages after the ones
 * cached. Least recently used first out, bounded by lists and by bytes; a miss only costs a
 * longer read. Keys: {@link TranscriptCache.step}, {@link TranscriptCache.thread}.
 */
export class TranscriptCache {
  private readonly entries = new Map<string, Entry>();
  private totalBytes = 0;

  constructor(
    private readonly maxLists = TRANSCRIPT_CACHE_DEFAULTS.maxLists,
    private readonly maxBytes = TRANSCRIPT_CACHE_DEFAULTS.maxBytes,
  ) {}

  /** The key of a step's transcript list. */
  static step(run_id: string, step_id: string): string {
    return `step ${run_id}/${step_id}`;
  }

  /** The key of a thread's messages: `origin` (its first run) tells a thread from a deleted one of the same id. */
  static thread(thread_key: string, origin: string): string {
    return `thread ${thread_key} ${origin}`;
  }

  /** The cached first messages of a list (none when it is not cached). */
  get(key: string): readonly ChatMessage[] {
    const entry = this.entries.get(key);
    if (!entry) return [];
    // Most recently used last.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.messages;
  }

  /**
   * Notes that a list holds `messages` first (committed: read from Redis, or appended by a save
   * that succeeded). `addedBytes`: the JSON size of those not cached before.
   */
  set(key: string, messages: readonly ChatMessage[], addedBytes: number): void {
    const previous = this.entries.get(key);
    if (previous && previous.messages.length >= messages.length) return;
    const sizeBytes = (previous?.sizeBytes ?? 0) + addedBytes;
    if (previous) {
      this.entries.delete(key);
      this.totalBytes -= previous.sizeBytes;
    }
    if (sizeBytes > this.maxBytes) return;
    this.entries.set(key, { messages: [...messages], sizeBytes });
    this.totalBytes += sizeBytes;
    for (const [oldest, entry] of this.entries) {
      if (this.entries.size <= this.maxLists && this.totalBytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.totalBytes -= entry.sizeBytes;
    }
  }
}
