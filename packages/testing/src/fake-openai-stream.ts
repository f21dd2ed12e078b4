import type { ServerResponse } from 'node:http';

/** How the fake server streams: characters of text per chunk, and a pause before each chunk. */
export interface FakeStreamPacing {
  /** Characters of text (or of a call's arguments) per chunk (default 8). */
  readonly chunk_chars?: number;
  /** Milliseconds before each chunk after the first (default 0). */
  readonly delay_ms?: number;
}

/**
 * What a test can make a streamed answer do wrong: stop without `[DONE]` half way, send a chunk
 * that is not JSON, never send a `finish_reason`, or fall silent half way with the connection open.
 */
export type FakeStreamFault = 'cut' | 'bad_chunk' | 'no_finish' | 'stall';

/** A streamed answer: text, or calls, with the usage sent last. */
export interface StreamedAnswer {
  readonly id: string;
  readonly model: string;
  readonly content?: string;
  /** A refusal instead of text, streamed in `delta.refusal` pieces. */
  readonly refusal?: string;
  readonly calls?: readonly { readonly id: string; readonly name: string; readonly arguments: string }[];
  readonly usage: { prompt_tokens: number; completion_tokens: number };
  readonly fault?: FakeStreamFault;
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function pieces(text: string, size: number): string[] {
  const out: string[] = [];
  for (let at = 0; at < text.length; at += size) out.push(text.slice(at, at + size));
  return out;
}

/**
 * Writes an answer as OpenAI streams one: `chat.completion.chunk`s as Server-Sent Events, text in
 * `delta.content` pieces, each call's id and name in its first fragment and its arguments split
 * over the following ones, the `finish_reason` on the last choice chunk, then a chunk with the
 * usage and no choices, then `[DONE]`. `onFirstToken` is called as the first text or call chunk is written.
 */
export async function writeStreamedAnswer(res: ServerResponse, answer: StreamedAnswer, pacing: FakeStreamPacing, onFirstToken: () => void): Promise<void> {
  const size = Math.max(1, pacing.chunk_chars ?? 8);
  const delayMs = pacing.delay_ms ?? 0;
  const base = { id: answer.id, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: answer.model };
  const deltas: Record<string, unknown>[] = [answer.refusal === undefined ? { role: 'assistant', content: '' } : { role: 'assistant', content: null, refusal: '' }];
  for (const piece of pieces(answer.content ?? '', size)) deltas.push({ content: piece });
  for (const piece of pieces(answer.refusal ?? '', size)) deltas.push({ refusal: piece });
  for (const [index, call] of (answer.calls ?? []).entries()) {
    deltas.push({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] });
    for (const piece of pieces(call.arguments, size)) deltas.push({ tool_calls: [{ index, function: { arguments: piece } }] });
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const send = (data: unknown) => res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
  let told = false;
  for (const [position, delta] of deltas.entries()) {
    if (position > 1 && delayMs > 0) await pause(delayMs);
    if (res.destroyed) return;
    if ((answer.fault === 'cut' || answer.fault === 'stall') && position > 1 && position >= deltas.length / 2) {
      // A stall keeps the connection open, sending nothing more (the server's close ends it).
      if (answer.fault === 'cut') res.end();
      return;
    }
    if (answer.fault === 'bad_chunk' && position > 1 && position >= deltas.length / 2) send('{"id": "broken", "choices": [');
    send({ ...base, choices: [{ index: 0, delta, finish_reason: null }] });
    if (position > 0 && !told) {
      told = true;
      onFirstToken();
    }
  }
  if (answer.fault !== 'no_finish') send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: answer.calls?.length ? 'tool_calls' : 'stop' }] });
  send({ ...base, choices: [], usage: { ...answer.usage, total_tokens: answer.usage.prompt_tokens + answer.usage.completion_tokens } });
  send('[DONE]');
  res.end();
}
