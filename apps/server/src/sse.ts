import type { TraceEvent } from '@arcflow/core';
import type { FastifyReply } from 'fastify';

/** The most a slow client may make `serve` hold for it (SPEC §19): past it, the client is disconnected. */
export const MAX_HELD_BYTES = 1024 * 1024;

const CRLF = Buffer.from('\r\n');

/**
 * An SSE frame's bytes, made once and written to every client it goes to: as they are, and
 * framed as one chunk of a chunked HTTP/1.1 body (`<size in hex>\r\n<bytes>\r\n`), so that a
 * client's write is one socket write of bytes already made.
 */
export class SseFrame {
  readonly bytes: Buffer;
  private framed: Buffer | undefined;

  constructor(text: string) {
    this.bytes = Buffer.from(text);
  }

  /** The frame as one chunk of a chunked body. */
  get chunk(): Buffer {
    this.framed ??= Buffer.concat([Buffer.from(`${this.bytes.length.toString(16)}\r\n`), this.bytes, CRLF]);
    return this.framed;
  }
}

export interface EventStream {
  send(events: readonly TraceEvent[]): void;
  /** Writes SSE frames as they are (each ending in a blank line). */
  write(frames: string): void;
  /** Writes a frame made once for all the clients it goes to. */
  writeFrame(frame: SseFrame): void;
  /** Resolves when what was written has gone to the socket (at once when nothing waits), or the stream closed. */
  drained(): Promise<void>;
  /** Whether the client was disconnected for reading slower than the stream was written. */
  readonly overflowed: boolean;
  end(): void;
  onClose(listener: () => void): void;
}

/**
 * Turns the reply into a Server-Sent Events stream: each event as `id: <seq>`, `event: <kind>`,
 * `data: <json>`, so a browser's reconnect sends `Last-Event-ID` and resumes after it; a comment
 * line every `heartbeatMs` keeps proxies from closing an idle stream.
 *
 * Frames go straight to the socket once the head is sent, each already framed as a chunk of the
 * chunked body (HTTP/1.1), so a frame shared by many clients costs each one socket write and no
 * encoding; a response without a chunked body (HTTP/1.0, `HEAD`) is written through the response.
 *
 * Backpressure: once the socket takes no more (`write` answered false), frames wait in a queue
 * until it drains and are then written as one; when a frame comes while they wait and what waits
 * (the queue and the socket's own buffer) passes `maxHeldBytes`, the connection is destroyed,
 * and the client's reconnect with `Last-Event-ID` resumes where it was (a single frame larger
 * than that is still written whole when nothing waits). A heartbeat is not queued: a stream that
 * waits is not idle.
 */
export function openEventStream(reply: FastifyReply, heartbeatMs: number, headers: Readonly<Record<string, string>> = {}, maxHeldBytes = MAX_HELD_BYTES): EventStream {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    // Headers the app's hooks set on the reply (CORS), which a hijacked reply would not send.
    ...(reply.getHeaders() as Record<string, string>),
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    ...headers,
  });
  // Sends the head (with the first bytes): from here, what is written to the socket follows it.
  raw.write(': stream open\n\n');
  const socket = raw.chunkedEncoding && raw.socket ? raw.socket : undefined;
  /** Where frames go: the socket, or the response when its body is not chunked. */
  const sink: { write(bytes: Buffer): boolean; readonly writableLength: number } = socket ?? raw;
  const bytesOf = socket ? (frame: SseFrame) => frame.chunk : (frame: SseFrame) => frame.bytes;
  let waiting = false;
  let queued: Buffer[] = [];
  let queuedBytes = 0;
  let drainWaiters: (() => void)[] = [];
  let overflowed = false;
  const released = () => {
    const waiters = drainWaiters;
    drainWaiters = [];
    for (const wake of waiters) wake();
  };
  const put = (bytes: Buffer) => {
    if (sink.write(bytes)) return;
    waiting = true;
    (socket ?? raw).once('drain', flush);
  };
  const flush = () => {
    waiting = false;
    const bytes = queued.length === 1 ? queued[0]! : Buffer.concat(queued);
    queued = [];
    queuedBytes = 0;
    if (bytes.length > 0 && !closed) put(bytes);
    if (!waiting) released();
  };
  const overflow = () => {
    overflowed = true;
    close();
    raw.destroy();
  };
  const heartbeat = setInterval(() => {
    if (!waiting) raw.write(': ping\n\n');
  }, heartbeatMs);
  const listeners: (() => void)[] = [];
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    clearInterval(heartbeat);
    queued = [];
    released();
    for (const listener of listeners) listener();
  };
  raw.on('close', close);
  const writeFrame = (frame: SseFrame) => {
    if (closed) return;
    const bytes = bytesOf(frame);
    if (!waiting) return put(bytes);
    queued.push(bytes);
    queuedBytes += bytes.length;
    if (sink.writableLength + queuedBytes > maxHeldBytes) overflow();
  };
  const write = (frames: string) => writeFrame(new SseFrame(frames));
  return {
    send(events) {
      write(events.map((event) => `id: ${event.seq}\nevent: ${event.kind}\ndata: ${JSON.stringify(event)}\n\n`).join(''));
    },
    write,
    writeFrame,
    drained() {
      return waiting && !closed ? new Promise((resolve) => drainWaiters.push(resolve)) : Promise.resolve();
    },
    get overflowed() {
      return overflowed;
    },
    end() {
      if (closed) return;
      const rest = queued;
      close();
      if (rest.length > 0) sink.write(Buffer.concat(rest));
      raw.end();
    },
    onClose(listener) {
      if (closed) listener();
      else listeners.push(listener);
    },
  };
}
