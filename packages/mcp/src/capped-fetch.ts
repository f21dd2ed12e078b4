/** The most one message from a server may take: a larger answer fails its call instead of filling the worker's memory. */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** Statuses whose responses have no body (a Response cannot be made with one). */
const NO_BODY = new Set([101, 103, 204, 205, 304]);

/**
 * `fetch` for the streamable HTTP transport that fails the response to a request (a POST: one
 * message's answer, JSON or an SSE stream) once its body passes `maxBytes`. What a server sends is
 * untrusted; the long-lived GET stream of notifications is left as it is.
 */
export function cappedFetch(maxBytes: number = MAX_MESSAGE_BYTES): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    if ((init?.method ?? 'GET').toUpperCase() !== 'POST' || !response.body || NO_BODY.has(response.status)) return response;
    let seen = 0;
    const counted = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          seen += chunk.byteLength;
          if (seen > maxBytes) controller.error(new Error(`the server's answer is over ${maxBytes} bytes`));
          else controller.enqueue(chunk);
        },
      }),
    );
    return new Response(counted, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}
