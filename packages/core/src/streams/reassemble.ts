import type { StreamChunk } from './chunks.ts';

/** An iteration's text as a reader rebuilds it from the stream. */
export interface IterationText {
  readonly step_id: string;
  readonly iteration: number;
  /** The attempt whose text this is (the last one streamed). */
  readonly attempt: number;
  readonly text: string;
}

/**
 * Rebuilds each iteration's text from a run's chunks, the way every reader must: a `reset`
 * discards what the iteration streamed before it, so the text is that of its last attempt.
 * Feed it chunks in offset order; `texts()` gives the iterations in the order they first streamed.
 */
export class StreamReassembler {
  private readonly iterations = new Map<string, { step_id: string; iteration: number; attempt: number; parts: string[] }>();

  add(chunk: StreamChunk): void {
    if (chunk.type !== 'text' && chunk.type !== 'reset') return;
    const key = `${chunk.step_id}|${chunk.iteration}`;
    const current = this.iterations.get(key);
    if (chunk.type === 'reset' || !current) {
      this.iterations.set(key, { step_id: chunk.step_id, iteration: chunk.iteration, attempt: chunk.attempt, parts: chunk.type === 'text' ? [chunk.delta] : [] });
      return;
    }
    current.attempt = chunk.attempt;
    current.parts.push(chunk.delta);
  }

  texts(): IterationText[] {
    return [...this.iterations.values()].map(({ step_id, iteration, attempt, parts }) => ({ step_id, iteration, attempt, text: parts.join('') }));
  }
}
