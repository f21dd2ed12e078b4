import type { ChatMessage } from '@arcflow/core';

/** The transcript cache's bounds: steps kept, and the message bytes (JSON) kept across them. */
export const TRANSCRIPT_CACHE_DEFAULTS = Object.freeze({ maxSteps: 1_000, maxBytes: 64 * 1024 * 1024 });

interface Entry {
  messages: ChatMessage[];
  sizeBytes: number;
}

/**
 * The transcripts a worker has read or written lately, per run and step: the first messages of a
 * step's transcript list, which never change once written (the list is only appended to, and
 * only by a save that commits them). A read asks Redis for the messages after the ones cached.
 * Least recently used first out, bounded by steps and by bytes; a miss only costs a longer read.
 */
export class TranscriptCache {
  private readonly entries = new Map<string, Entry>();
  private totalBytes = 0;

  constructor(
    private readonly maxSteps = TRANSCRIPT_CACHE_DEFAULTS.maxSteps,
    private readonly maxBytes = TRANSCRIPT_CACHE_DEFAULTS.maxBytes,
  ) {}

  /** The cached first messages of a step's transcript (none when it is not cached). */
  get(run_id: string, step_id: string): readonly ChatMessage[] {
    const key = `${run_id}/${step_id}`;
    const entry = this.entries.get(key);
    if (!entry) return [];
    // Most recently used last.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.messages;
  }

  /**
   * Notes that a step's transcript list holds `messages` first (committed: read from Redis, or
   * appended by a save that succeeded). `addedBytes`: the JSON size of those not cached before.
   */
  set(run_id: string, step_id: string, messages: readonly ChatMessage[], addedBytes: number): void {
    const key = `${run_id}/${step_id}`;
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
      if (this.entries.size <= this.maxSteps && this.totalBytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.totalBytes -= entry.sizeBytes;
    }
  }
}
