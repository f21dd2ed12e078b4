import { EventEmitter } from 'node:events';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type { FastifyReply } from 'fastify';
import { describe, expect, it } from 'vitest';
import { SseFrame, openEventStream } from '../src/sse.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A response whose socket takes writes until `full`, then buffers them (`writableLength`) until `drain()`; its body is not chunked (HTTP/1.0), so frames go through it. */
class SlowResponse extends EventEmitter {
  readonly written: string[] = [];
  full = false;
  writableLength = 0;
  destroyed = false;
  writeHead(): void {}
  write(data: string | Buffer): boolean {
    this.written.push(String(data));
    if (!this.full) return true;
    this.writableLength += Buffer.byteLength(data);
    return false;
  }
  end(data?: string | Buffer): void {
    if (data) this.written.push(String(data));
  }
  destroy(): void {
    this.destroyed = true;
    this.emit('close');
  }
  drain(): void {
    this.full = false;
    this.writableLength = 0;
    this.emit('drain');
  }
}

function open(maxHeldBytes: number, heartbeatMs = 20) {
  const raw = new SlowResponse();
  const reply = { hijack: () => undefined, raw, getHeaders: () => ({}) } as unknown as FastifyReply;
  return { raw, stream: openEventStream(reply, heartbeatMs, {}, maxHeldBytes) };
}

describe('the SSE writer: backpressure and heartbeats (SPEC §19)', () => {
  it('writes nothing more once the socket is full, heartbeats included, then what waited as one write on drain', async () => {
    const { raw, stream } = open(1_000);
    raw.full = true;
    stream.write('a\n\n');
    stream.write('b\n\n');
    stream.write('c\n\n');
    let drained = false;
    void stream.drained().then(() => {
      drained = true;
    });
    await sleep(100);
    expect(raw.written).toEqual([': stream open\n\n', 'a\n\n']);
    expect(drained).toBe(false);
    raw.drain();
    expect(raw.written[2]).toBe('b\n\nc\n\n');
    await sleep(0);
    expect(drained).toBe(true);
    // Drained, the heartbeat goes on.
    await sleep(60);
    expect(raw.written.slice(3)).toContain(': ping\n\n');
    stream.end();
  });

  it('disconnects a client once what waits for it passes the limit, and says so', async () => {
    const { raw, stream } = open(100);
    let closed = false;
    stream.onClose(() => {
      closed = true;
    });
    raw.full = true;
    stream.write(`${'x'.repeat(60)}\n\n`);
    stream.write(`${'y'.repeat(30)}\n\n`);
    expect(raw.destroyed).toBe(false);
    stream.write(`${'z'.repeat(30)}\n\n`);
    expect(raw.destroyed).toBe(true);
    expect(stream.overflowed).toBe(true);
    expect(closed).toBe(true);
    // Nothing is written after.
    stream.write('late\n\n');
    expect(raw.written.some((frame) => frame.startsWith('late'))).toBe(false);
  });

  it('writes a frame larger than the limit whole when nothing waits', () => {
    const { raw, stream } = open(100);
    raw.full = true;
    stream.write(`${'x'.repeat(500)}\n\n`);
    expect(raw.destroyed).toBe(false);
    expect(stream.overflowed).toBe(false);
    stream.end();
  });
});

/** A real HTTP server whose every request is answered by `handle` with an event stream. */
async function serveStreams(handle: (stream: ReturnType<typeof openEventStream>) => void, maxHeldBytes = 1024 * 1024) {
  const server = http.createServer((_request, response) => {
    const reply = { hijack: () => undefined, raw: response, getHeaders: () => ({}) } as unknown as FastifyReply;
    handle(openEventStream(reply, 60_000, {}, maxHeldBytes));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, port };
}

describe('the SSE writer on a real socket', () => {
  it('writes shared frames straight to the socket as chunks of a chunked body that ends cleanly and leaves the connection usable', async () => {
    const shared = new SseFrame('id: 1\nevent: text\ndata: {"delta":"héllo"}\n\n');
    const { server, port } = await serveStreams((stream) => {
      stream.writeFrame(shared);
      stream.write('data: [DONE]\n\n');
      stream.end();
    });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = () =>
      new Promise<{ body: string; headers: http.IncomingHttpHeaders; reused: boolean }>((resolve, reject) => {
        const request = http.get({ port, host: '127.0.0.1', path: '/', agent }, (response) => {
          let body = '';
          response.setEncoding('utf8');
          response.on('data', (data: string) => {
            body += data;
          });
          response.on('end', () => resolve({ body, headers: response.headers, reused: request.reusedSocket }));
        });
        request.on('error', reject);
      });
    try {
      const first = await get();
      expect(first.headers['transfer-encoding']).toBe('chunked');
      expect(first.body).toBe(': stream open\n\nid: 1\nevent: text\ndata: {"delta":"héllo"}\n\ndata: [DONE]\n\n');
      // The chunked body's end was where the parser expected it: the next request goes on the same connection.
      const second = await get();
      expect(second.reused).toBe(true);
      expect(second.body).toBe(first.body);
    } finally {
      agent.destroy();
      server.close();
    }
  });

  it('disconnects a client that reads nothing once what waits for it passes the limit', async () => {
    let stream: ReturnType<typeof openEventStream> | undefined;
    const { server, port } = await serveStreams((opened) => {
      stream = opened;
    }, 64 * 1024);
    const client = net.connect(port, '127.0.0.1');
    try {
      client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      client.pause();
      while (!stream) await sleep(5);
      const frame = new SseFrame(`data: ${'x'.repeat(16 * 1024)}\n\n`);
      let written = 0;
      // The kernel's buffers take the first megabytes; then the socket says no, frames wait, and past 64 KiB the client is dropped.
      while (!stream.overflowed && written < 256 * 1024 * 1024) {
        stream.writeFrame(frame);
        written += frame.bytes.length;
        if (written % (1024 * 1024) === 0) await sleep(1);
      }
      expect(stream.overflowed).toBe(true);
    } finally {
      client.destroy();
      server.close();
    }
  });
});
