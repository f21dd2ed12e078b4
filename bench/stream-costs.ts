// What streaming costs a run in Redis (SPEC §12): the Redis commands, bytes each way and stream
// entries of a run not asked to stream against the same run asked to stream, nobody reading
// either, in the same process. The run is the one the streaming issue measured: three
// iterations, seven tool calls (four, then three), then an answer of 600 characters that the
// fake server streams in 4-character pieces, a piece every 2 ms.
//
// Counted by a TCP proxy between the worker and Redis: every connection of the worker (its engine
// and BullMQ's) goes through it, so it sees every command sent (each RESP request array is one)
// and every byte, whatever else uses the shared Redis; Redis's own INFO counters would count other
// clients too. The client that enqueues and waits connects directly: how a backend waits is the
// same for both runs and not what streaming costs. Commands run inside Lua scripts are not round
// trips and are not counted here; the stream entries a run adds (XLEN of its stream) show what
// its scripts wrote.
import { type Server, type Socket, createConnection, createServer } from 'node:net';
import { Agent, silentLogger, tool } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { createClient, keysFor, startWorker } from '@arcflow/queue';
import { type FakeRequest, type FakeTurn, startFakeOpenAI } from '@arcflow/testing';
import { Redis } from 'ioredis';
import { REDIS_URL, type Row } from './lib.ts';

const noop = tool({ name: 'bench_noop', description: 'does nothing', input_schema: { type: 'object' }, handler: () => 'ok' });
const agent = new Agent({ name: 'bench_stream_costs', tools: [noop] });
const ANSWER = 'An answer of a few hundred characters, written by the model piece by piece. '.repeat(8).slice(0, 600);

/** Four calls, then three, then the answer: by how many assistant turns the conversation holds. */
function turnFor(request: FakeRequest): FakeTurn {
  const turns = (request.body.messages as { role: string }[]).filter((message) => message.role === 'assistant').length;
  // Distinct arguments: identical calls would be answered as repeats, without a result of their own.
  const calls = (count: number) => Array.from({ length: count }, (_, index) => ({ name: 'bench_noop', arguments: { n: turns * 10 + index } }));
  if (turns === 0) return { type: 'tools', calls: calls(4) };
  if (turns === 1) return { type: 'tools', calls: calls(3) };
  return { type: 'text', content: ANSWER, usage: { prompt_tokens: 40, completion_tokens: 150 } };
}

/** A proxy to Redis that counts the commands and the bytes that pass through it. */
interface CountingProxy {
  readonly url: string;
  readonly counts: { commands: number; sent: number; received: number };
  close(): Promise<void>;
}

async function countingProxy(target: URL): Promise<CountingProxy> {
  const counts = { commands: 0, sent: 0, received: 0 };
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: target.hostname, port: Number(target.port || 6379) });
    sockets.add(client).add(upstream);
    const requests = new RequestCounter();
    client.on('data', (data: Buffer) => {
      counts.sent += data.length;
      counts.commands += requests.feed(data);
      upstream.write(data);
    });
    upstream.on('data', (data: Buffer) => {
      counts.received += data.length;
      client.write(data);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `redis://127.0.0.1:${port}`,
    counts,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Counts the RESP requests in a client's byte stream: each is an array (`*<n>\r\n`) of bulk
 * strings (`$<len>\r\n<bytes>\r\n`), which is how ioredis sends every command.
 */
class RequestCounter {
  private buffer: Buffer = Buffer.alloc(0);
  private left = 0;

  feed(data: Buffer): number {
    this.buffer = this.buffer.length === 0 ? data : Buffer.concat([this.buffer, data]);
    let count = 0;
    let at = 0;
    for (;;) {
      const line = this.buffer.indexOf('\r\n', at);
      if (line < 0) break;
      const head = this.buffer.toString('latin1', at, at + 1);
      const number = Number(this.buffer.toString('latin1', at + 1, line));
      if (head === '*' && this.left === 0) {
        count += 1;
        this.left = number;
        at = line + 2;
        continue;
      }
      if (head !== '$') throw new Error(`unexpected RESP request byte '${head}'`);
      const end = line + 2 + number + 2;
      if (end > this.buffer.length) break;
      this.left -= 1;
      at = end;
    }
    this.buffer = this.buffer.subarray(at);
    return count;
  }
}

/** Per run of one arm: commands, bytes each way, and the entries of its stream. */
interface ArmCost {
  readonly commands: number;
  readonly sent: number;
  readonly received: number;
  readonly entries: number;
}

async function arm(prefix: string, stream: boolean, runs: number): Promise<ArmCost> {
  const server = await startFakeOpenAI({ fallback: turnFor, stream: { chunk_chars: 4, delay_ms: 2 } });
  const proxy = await countingProxy(new URL(REDIS_URL));
  const provider = openaiProvider({ base_url: server.url, api_key: 'k', timeout_ms: 30_000, logger: silentLogger });
  const worker = await startWorker({ agents: [agent], provider, redis: proxy.url, prefix, logger: silentLogger });
  const client = createClient({ redis: REDIS_URL, prefix });
  const direct = new Redis(REDIS_URL);
  try {
    // One run first warms the connections and loads the scripts.
    await client.wait((await client.enqueue({ agent: agent.name, input: 'warm-up', stream })).run_id, { timeout_ms: 60_000 });
    const before = { ...proxy.counts };
    const run_ids: string[] = [];
    for (let index = 0; index < runs; index += 1) {
      const { run_id } = await client.enqueue({ agent: agent.name, input: `run ${index}`, stream });
      await client.wait(run_id, { timeout_ms: 60_000 });
      run_ids.push(run_id);
    }
    const after = { ...proxy.counts };
    const keys = keysFor(prefix);
    const entries = await Promise.all(run_ids.map((run_id) => direct.xlen(keys.run(run_id).stream)));
    return {
      commands: (after.commands - before.commands) / runs,
      sent: (after.sent - before.sent) / runs,
      received: (after.received - before.received) / runs,
      entries: entries.reduce((sum, each) => sum + each, 0) / runs,
    };
  } finally {
    await client.close();
    await worker.close();
    direct.disconnect();
    await proxy.close();
    await server.close();
  }
}

/** The rows: each measure per run, not asked to stream (arcflow) against asked to stream (baseline). */
export async function streamCostRows(prefix: (name: string) => string, runs = 20): Promise<Row[]> {
  const streamed = await arm(prefix('stream-costs-streamed'), true, runs);
  const plain = await arm(prefix('stream-costs-plain'), false, runs);
  const row = (measure: string, key: keyof ArmCost, unit: string): Row => ({
    measure: `${measure} per run, 3 iterations + 7 tool calls + 600-char answer, not asked to stream (vs asked, nobody reading)`,
    arcflow: `${plain[key].toFixed(0)} ${unit}`,
    baseline: `${streamed[key].toFixed(0)} ${unit}`,
    ratio: `${(plain[key] / streamed[key]).toFixed(2)}x`,
    target: key === 'commands' ? '<= asked' : 'info',
    verdict: key === 'commands' ? (plain.commands <= streamed.commands ? 'yes' : 'NO') : '-',
  });
  return [
    row("the worker's Redis commands (round trips)", 'commands', 'commands'),
    row('bytes the worker sent to Redis', 'sent', 'B'),
    row('bytes the worker received from Redis', 'received', 'B'),
    row("entries of the run's stream", 'entries', 'entries'),
  ];
}
