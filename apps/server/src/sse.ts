import type { TraceEvent } from '@arcflow/core';
import type { FastifyReply } from 'fastify';

/** The most a slow client may make `serve` hold for it (SPEC §19): past it, the client is disconnected. */
export const MAX_HELD_BYTES = 1024 * 1024;

export interface EventStream {
  send(events: readonly TraceEvent[]): void;
  /** Writes SSE frames as they are (each ending in a blank line). */
  write(frames: string): void;
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
 * Backpressure: once the socket takes no more (`write` answered false), frames wait in a queue
 * until it drains and are then written as one; when a frame comes while they wait and what waits
 * (the queue and the response's own buffer) passes `maxHeldBytes`, the connection is destroyed,
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
  let waiting = false;
  let queued: string[] = [];
  let queuedBytes = 0;
  let drainWaiters: (() => void)[] = [];
  let overflowed = false;
  const released = () => {
    const waiters = drainWaiters;
    drainWaiters = [];
    for (const wake of waiters) wake();
  };
  const put = (frames: string) => {
    if (raw.write(frames)) return;
    waiting = true;
    raw.once('drain', flush);
  };
  const flush = () => {
    waiting = false;
    const frames = queued.join('');
    queued = [];
    queuedBytes = 0;
    if (frames !== '' && !closed) put(frames);
    if (!waiting) released();
  };
  const overflow = () => {
    overflowed = true;
    close();
    raw.destroy();
  };
  raw.write(': stream open\n\n');
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
  const write = (frames: string) => {
    if (closed) return;
    if (!waiting) return put(frames);
    queued.push(frames);
    queuedBytes += Buffer.byteLength(frames);
    if (raw.writableLength + queuedBytes > maxHeldBytes) overflow();
  };
  return {
    send(events) {
      write(events.map((event) => `id: ${event.seq}\nevent: ${event.kind}\ndata: ${JSON.stringify(event)}\n\n`).join(''));
    },
    write,
    drained() {
      return waiting && !closed ? new Promise((resolve) => drainWaiters.push(resolve)) : Promise.resolve();
    },
    get overflowed() {
      return overflowed;
    },
    end() {
      if (closed) return;
      const rest = queued.join('');
      close();
      raw.end(rest);
    },
    onClose(listener) {
      if (closed) listener();
      else listeners.push(listener);
    },
  };
}
