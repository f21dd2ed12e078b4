import type { TraceEvent } from '@arcflow/core';
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
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
  // Headers the app's hooks set on the reply (CORS), which a hijacked reply would not send.
  return openResponseStream(reply.raw, heartbeatMs, { app: reply.getHeaders() as Record<string, string>, own: headers }, maxHeldBytes);
}

/**
 * {@link openEventStream} on a plain Node response (a child process of `serve --processes`):
 * `headers.app` are the app's (CORS), which the stream's own override, and `headers.own` override those.
 */
export function openResponseStream(
  raw: ServerResponse,
  heartbeatMs: number,
  headers: { readonly app: Readonly<Record<string, string>>; readonly own: Readonly<Record<string, string>> },
  maxHeldBytes = MAX_HELD_BYTES,
): EventStream {
  return new SseStream(openHead(raw, headers.app, headers.own), heartbeatMs, maxHeldBytes);
}

/** Sends the response's head with the first bytes: from here, what is written to the socket follows it. */
function openHead(raw: ServerResponse, app: Readonly<Record<string, string>>, headers: Readonly<Record<string, string>>): ServerResponse {
  raw.writeHead(200, {
    ...app,
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    ...headers,
  });
  raw.write(': stream open\n\n');
  return raw;
}

/** An event stream on a response whose head is sent (see {@link openEventStream}). */
class SseStream implements EventStream {
  private socket: Socket | undefined;
  /** Where frames go: the socket once the head is in it, else the response (always when its body is not chunked). */
  private sink: { write(bytes: Buffer): boolean; readonly writableLength: number };
  private readonly heartbeat: NodeJS.Timeout;
  private readonly listeners: (() => void)[] = [];
  private waiting = false;
  private queued: Buffer[] = [];
  private queuedBytes = 0;
  private drainWaiters: (() => void)[] = [];
  private disconnected = false;
  private closed = false;

  constructor(
    private readonly raw: ServerResponse,
    heartbeatMs: number,
    private readonly maxHeldBytes: number,
  ) {
    this.sink = raw;
    // The head and the opening comment may still sit in the response's own buffer (Node 24 hands
    // it to the socket on the next tick): frames go through the response until that has happened.
    if (raw.chunkedEncoding) setImmediate(this.toSocket);
    this.heartbeat = setInterval(() => {
      if (!this.waiting) raw.write(': ping\n\n');
    }, heartbeatMs);
    raw.on('close', this.close);
  }

  send(events: readonly TraceEvent[]): void {
    this.write(events.map((event) => `id: ${event.seq}\nevent: ${event.kind}\ndata: ${JSON.stringify(event)}\n\n`).join(''));
  }

  write(frames: string): void {
    this.writeFrame(new SseFrame(frames));
  }

  writeFrame(frame: SseFrame): void {
    if (this.closed) return;
    const bytes = this.socket ? frame.chunk : frame.bytes;
    if (!this.waiting) {
      this.put(bytes);
      return;
    }
    this.queued.push(bytes);
    this.queuedBytes += bytes.length;
    if (this.sink.writableLength + this.queuedBytes > this.maxHeldBytes) this.overflow();
  }

  drained(): Promise<void> {
    return this.waiting && !this.closed ? new Promise((resolve) => this.drainWaiters.push(resolve)) : Promise.resolve();
  }

  get overflowed(): boolean {
    return this.disconnected;
  }

  end(): void {
    if (this.closed) return;
    const rest = this.queued;
    this.close();
    if (rest.length > 0) this.sink.write(Buffer.concat(rest));
    this.raw.end();
  }

  onClose(listener: () => void): void {
    if (this.closed) listener();
    else this.listeners.push(listener);
  }

  private put(bytes: Buffer): void {
    if (this.sink.write(bytes)) return;
    this.waiting = true;
    (this.socket ?? this.raw).once('drain', this.flush);
  }

  /** Writes straight to the socket from here, if the response left nothing of its own to send first. */
  private readonly toSocket = (): void => {
    const socket = this.raw.socket;
    if (this.closed || this.waiting || !socket || this.raw.writableLength > 0) return;
    this.socket = socket;
    this.sink = socket;
  };

  private readonly flush = (): void => {
    this.waiting = false;
    const bytes = this.queued.length === 1 ? this.queued[0]! : Buffer.concat(this.queued);
    this.queued = [];
    this.queuedBytes = 0;
    if (bytes.length > 0 && !this.closed) this.put(bytes);
    if (!this.waiting) this.released();
  };

  private overflow(): void {
    this.disconnected = true;
    this.close();
    this.raw.destroy();
  }

  private released(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const wake of waiters) wake();
  }

  private readonly close = (): void => {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.heartbeat);
    this.queued = [];
    this.released();
    for (const listener of this.listeners) listener();
  };
}
