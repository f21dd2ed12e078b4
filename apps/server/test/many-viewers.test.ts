import http from 'node:http';
import { type StreamChunk, StreamReassembler } from '@arcflow/core';
import { TEST_REDIS_URL, redisConnectionsOf, startFakeOpenAI } from '@arcflow/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectedAnswer, streamTurn } from '../../../packages/queue/test/fixtures/stream-fake.ts';
import { type StreamStack, startStreamStack } from './stream-stack.ts';

const KEYS = { read: 'viewers-read-0123456789', write: 'viewers-write-0123456789' };
const API_KEYS = `viewer:${KEYS.read}:read,backend:${KEYS.write}:write`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function enqueue(stack: StreamStack, input: string): Promise<string> {
  const response = await fetch(`${stack.serve.url}/v1/runs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEYS.write}`, 'content-type': 'application/json' },
    body: JSON.stringify({ agent: 'stream_agent', input }),
  });
  return ((await response.json()) as { run_id: string }).run_id;
}

/** A raw HTTP GET of the run's stream on a socket of its own; `paused`: the response is not read until `resume` is called. */
function getStream(stack: StreamStack, run_id: string, headers: Record<string, string> = {}, paused = false, route = 'stream') {
  let resume: () => void = () => undefined;
  const body = new Promise<string>((resolve, reject) => {
    const request = http.get(`${stack.serve.url}/v1/runs/${run_id}/${route}`, { agent: false, headers: { authorization: `Bearer ${KEYS.read}`, ...headers } }, (response) => {
      if (response.statusCode !== 200) reject(new Error(`status ${response.statusCode}`));
      const parts: string[] = [];
      response.setEncoding('utf8');
      if (paused) {
        response.pause();
        resume = () => void response.resume();
      }
      response.on('data', (part: string) => parts.push(part));
      // A response cut short (the server disconnected the client) ends with what came.
      response.on('error', () => undefined);
      response.on('close', () => resolve(parts.join('')));
    });
    request.on('error', reject);
  });
  return { body, resume: () => resume() };
}

/** The data of the SSE frames that came whole (chunks of a run stream). */
function chunksIn(body: string): StreamChunk[] {
  const frames = body.split('\n\n').slice(0, -1);
  return frames.flatMap((frame) => {
    const data = frame.split('\n').find((line) => line.startsWith('data: '));
    return data ? [JSON.parse(data.slice(6)) as StreamChunk] : [];
  });
}

function lastText(chunks: readonly StreamChunk[]): string | undefined {
  const reassembler = new StreamReassembler();
  for (const chunk of chunks) reassembler.add(chunk);
  return reassembler.texts().at(-1)?.text;
}

describe('many viewers of one run on one serve (SPEC §19)', () => {
  const CLIENTS = 2_000;
  const EVENT_CLIENTS = 200;
  const CHARS = 2_400;
  let stack: StreamStack;
  beforeAll(async () => {
    // An answer of 400 six-character chunks, one every 10 ms: the clients come while it streams.
    stack = await startStreamStack('many-viewers', API_KEYS, 10, { ARCFLOW_API_RATE: '1000000' }, { chars: CHARS });
  }, 60_000);
  afterAll(() => stack?.stop());

  it("gives 2,000 concurrent SSE clients of a streaming run the whole text and its end, and 200 more its events, through at most 4 of serve's Redis connections", async () => {
    const redis = new Redis(TEST_REDIS_URL);
    try {
      const run_id = await enqueue(stack, 'many viewers');
      const clients = Array.from({ length: CLIENTS }, () => getStream(stack, run_id).body);
      const eventClients = Array.from({ length: EVENT_CLIENTS }, () => getStream(stack, run_id, { accept: 'text/event-stream' }, false, 'events').body);
      let settled = 0;
      for (const client of [...clients, ...eventClients]) void client.finally(() => (settled += 1));
      const counts: number[] = [];
      while (settled < CLIENTS + EVENT_CLIENTS) {
        // A count reads the process's sockets and the machine's TCP table (a few hundred ms with 2,200 clients): once a second.
        counts.push(await redisConnectionsOf(stack.serve.child.pid!, redis, Number(new URL(TEST_REDIS_URL).port || 6379)));
        await sleep(1_000);
      }
      const bodies = await Promise.all(clients);
      const expected = expectedAnswer('many viewers', CHARS);
      for (const body of bodies) {
        const chunks = chunksIn(body);
        expect(chunks.map((chunk) => chunk.offset)).toEqual(chunks.map((_, index) => index + 1));
        expect(chunks.at(-1)).toMatchObject({ type: 'end', status: 'completed' });
        expect(lastText(chunks)).toBe(expected);
      }
      for (const body of await Promise.all(eventClients)) {
        const events = chunksIn(body) as unknown as { seq: number; kind: string }[];
        expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
        expect(events.at(-1)?.kind).toBe('RunCompleted');
      }
      expect(counts.length).toBeGreaterThan(2);
      expect(Math.max(...counts)).toBeLessThanOrEqual(4);
      // Not a count of nothing: serve's connections are seen (its client's, its own, the events' and the streams' reader).
      expect(Math.max(...counts)).toBeGreaterThanOrEqual(3);
    } finally {
      await redis.quit();
    }
  }, 90_000);
});

describe('a client that reads slower than the run streams (SPEC §19)', () => {
  const CHARS = 3_500_000;
  let stack: StreamStack;
  beforeAll(async () => {
    // 3.5 million characters (a provider call may answer 4 MiB) in 20,000-character chunks, cut
    // half way twice before a whole answer (each attempt's text is in the stream, then a reset):
    // 7 MB, more than loopback's socket buffers (about 4 MB) and the 1 MiB serve holds.
    let cuts = 0;
    const fake_server = await startFakeOpenAI({
      fallback: (request) => {
        const turn = streamTurn(request, CHARS);
        return turn.type === 'text' && cuts++ < 2 ? { ...turn, stream_fault: 'cut' } : turn;
      },
      stream: { chunk_chars: 20_000, delay_ms: 2 },
    });
    stack = await startStreamStack('slow-viewer', API_KEYS, 2, {}, { server: fake_server });
  }, 60_000);
  afterAll(() => stack?.stop());

  it('is disconnected once serve holds more than 1 MiB for it, and its reconnect with Last-Event-ID loses nothing', async () => {
    const run_id = await enqueue(stack, 'a slow reader');
    const slow = getStream(stack, run_id, {}, true);
    const deadline = Date.now() + 30_000;
    while (!stack.serve.output().includes('SSE client disconnected: it read slower than the run streamed')) {
      if (Date.now() > deadline) throw new Error(`serve did not disconnect the slow client:\n${stack.serve.output().slice(-2_000)}`);
      await sleep(20);
    }
    slow.resume();
    const first = chunksIn(await slow.body);
    expect(first.at(-1)?.type).not.toBe('end');
    const lastId = first.at(-1)?.offset ?? 0;
    const rest = chunksIn(await getStream(stack, run_id, { 'last-event-id': String(lastId) }).body);
    const chunks = [...first, ...rest];
    expect(chunks.map((chunk) => chunk.offset)).toEqual(chunks.map((_, index) => index + 1));
    expect(chunks.at(-1)).toMatchObject({ type: 'end', status: 'completed' });
    expect(lastText(chunks)).toBe(expectedAnswer('a slow reader', CHARS));
  }, 60_000);
});
