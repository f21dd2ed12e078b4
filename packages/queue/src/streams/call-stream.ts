import type { StreamPart, StreamStore } from './stream-store.ts';

/** The least time between two writes of one call's text (SPEC §12). */
export const STREAM_BATCH_MS = 50;

/**
 * One provider call's text on its way to the run's stream. Text is written as it comes, but at
 * most one write per {@link STREAM_BATCH_MS} (the first at once, so the first text reaches readers
 * without waiting): what arrives in between is one chunk in the next write. What is left when the
 * call ends goes with the response's record (`part`), or in one last write when the call failed
 * (`abandon`). A failed write loses nothing a reader would see twice: the record then writes the
 * iteration's whole text again after a `reset`.
 */
export class CallStream {
  private pending = '';
  private lastWriteAt = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly streams: StreamStore,
    private readonly place: { readonly run_id: string; readonly step_id: string; readonly iteration: number; readonly attempt: number },
  ) {}

  /** Given to the provider as `onText`. */
  readonly onText = (delta: string): void => {
    if (this.closed || delta === '') return;
    this.pending += delta;
    this.schedule();
  };

  /** The call answered: what is left to stream goes with its record. */
  async part(text: string, calls: readonly (readonly [string, string])[]): Promise<StreamPart> {
    await this.close();
    return { attempt: this.place.attempt, text, pending: this.pending, calls };
  }

  /** The call failed: the text it told so far is written (a retry's `reset` will discard it). */
  async abandon(): Promise<void> {
    await this.close();
    if (this.pending !== '') await this.write(this.pending).catch(() => undefined);
  }

  private async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.writing;
  }

  private schedule(): void {
    if (this.closed || this.timer || this.writing) return;
    const waitMs = this.lastWriteAt + STREAM_BATCH_MS - performance.now();
    if (waitMs <= 0) this.flush();
    else this.timer = setTimeout(() => this.flush(), waitMs);
  }

  private flush(): void {
    this.timer = undefined;
    if (this.closed || this.pending === '') return;
    const text = this.pending;
    this.pending = '';
    this.lastWriteAt = performance.now();
    this.writing = this.write(text)
      // A lost write is made good when the response is recorded (its text no longer adds up).
      .catch(() => undefined)
      .finally(() => {
        this.writing = undefined;
        if (this.pending !== '') this.schedule();
      });
  }

  private async write(text: string): Promise<void> {
    const { run_id, step_id, iteration, attempt } = this.place;
    await this.streams.appendText(run_id, step_id, iteration, attempt, text);
  }
}
