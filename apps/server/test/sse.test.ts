import { EventEmitter } from 'node:events';
import type { FastifyReply } from 'fastify';
import { describe, expect, it } from 'vitest';
import { openEventStream } from '../src/sse.ts';

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
