/** How long a model whose server could not stream is called without streaming (SPEC §12). */
export const PLAIN_FOR_MS = 10 * 60_000;

/**
 * The models a provider calls without streaming for now, because their server answered a
 * streamed request with an error before its first chunk while a plain one worked. Each entry
 * lasts {@link PLAIN_FOR_MS}; then streaming is tried again. Held per provider, in memory.
 */
export class PlainModels {
  private readonly until = new Map<string, number>();

  /** Whether `model`'s calls are made without streaming now. */
  has(model: string, now = Date.now()): boolean {
    const until = this.until.get(model);
    if (until === undefined) return false;
    if (until > now) return true;
    this.until.delete(model);
    return false;
  }

  /** Calls `model` without streaming for the next {@link PLAIN_FOR_MS}; true when it was not so already. */
  add(model: string, now = Date.now()): boolean {
    const fresh = !this.has(model, now);
    this.until.set(model, now + PLAIN_FOR_MS);
    return fresh;
  }
}
