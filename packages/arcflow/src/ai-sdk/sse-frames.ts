/** One Server-Sent Events message: its `id:` and its `data:` (lines joined), when it has them. */
export interface SseFrame {
  readonly id?: string;
  readonly data?: string;
}

/**
 * Reads Server-Sent Events from a response body, frame by frame (a frame ends at a blank line;
 * comment lines and unknown fields are skipped). Tolerates `\r\n` line ends.
 */
export async function* sseFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      let end = buffer.indexOf('\n\n');
      while (end !== -1) {
        const frame = parseFrame(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf('\n\n');
        if (frame) yield frame;
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => undefined);
  }
}

function parseFrame(block: string): SseFrame | undefined {
  let id: string | undefined;
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'id') id = value;
    else if (field === 'data') data.push(value);
  }
  if (id === undefined && data.length === 0) return undefined;
  return { ...(id !== undefined ? { id } : {}), ...(data.length > 0 ? { data: data.join('\n') } : {}) };
}
