import type { TraceEvent } from '@arcflow/core';
import type { FastifyReply } from 'fastify';

export interface EventStream {
  send(events: readonly TraceEvent[]): void;
  /** Writes SSE frames as they are (each ending in a blank line). */
  write(frames: string): void;
  end(): void;
  onClose(listener: () => void): void;
}

/**
 * Turns the reply into a Server-Sent Events stream: each event as `id: <seq>`, `event: <kind>`,
 * `data: <json>`, so a browser's reconnect sends `Last-Event-ID` and resumes after it; a comment
 * line every `heartbeatMs` keeps proxies from closing an idle stream.
 */
export function openEventStream(reply: FastifyReply, heartbeatMs: number, headers: Readonly<Record<string, string>> = {}): EventStream {
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
  raw.write(': stream open\n\n');
  const heartbeat = setInterval(() => raw.write(': ping\n\n'), heartbeatMs);
  const listeners: (() => void)[] = [];
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    clearInterval(heartbeat);
    for (const listener of listeners) listener();
  };
  raw.on('close', close);
  return {
    send(events) {
      if (closed) return;
      raw.write(events.map((event) => `id: ${event.seq}\nevent: ${event.kind}\ndata: ${JSON.stringify(event)}\n\n`).join(''));
    },
    write(frames) {
      if (!closed) raw.write(frames);
    },
    end() {
      close();
      raw.end();
    },
    onClose(listener) {
      if (closed) listener();
      else listeners.push(listener);
    },
  };
}
