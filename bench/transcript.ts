// The append-only transcript (SPEC §11): what one iteration costs early and late in a long run
// whose tool returns 4 KiB: the engine's own time between provider calls, and the bytes Redis
// receives (INFO stats total_net_input_bytes; run it with nothing else on that Redis).
import { Agent, type ModelProvider, type ProviderResponse, silentLogger, tool } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { Redis } from 'ioredis';
import { REDIS_URL, percentile } from './lib.ts';

const PAGE = 'x'.repeat(4096);
const pages = tool({ name: 'bench_page', description: 'a 4 KiB page', input_schema: { type: 'object' }, handler: () => PAGE });
const reader = new Agent({ name: 'bench_reader', instructions: 'read every page', tools: [pages], loop_detection: false, tool_execution: { max_iterations: 10_000 } });

/** Run state (SPEC §17): a tool that appends 1 KiB to the state each round, and the same tool that keeps none. */
const NOTE = 'n'.repeat(1024);
const noting = tool({
  name: 'bench_note',
  description: 'notes 1 KiB in the run state',
  input_schema: { type: 'object' },
  handler: (_args: unknown, ctx) => {
    ctx.state.append('notes', NOTE);
    return 'noted';
  },
});
const plain = tool({ name: 'bench_note', description: 'notes nothing', input_schema: { type: 'object' }, handler: () => 'noted' });
const loopSettings = { loop_detection: false, tool_execution: { max_iterations: 10_000 } } as const;
export const stateAgents = {
  noting: new Agent({ name: 'bench_noter', tools: [noting], max_state_bytes: 4 * 1024 * 1024, ...loopSettings }),
  plain: new Agent({ name: 'bench_noter', tools: [plain], ...loopSettings }),
};

/** Iterations measured: 10 of them from each of these on. */
const WINDOW = 10;

export interface TranscriptWindow {
  /** The first iteration of the window. */
  readonly from: number;
  /** Median engine time between provider calls (ms): from the model's answer to the next call. */
  readonly iterationMs: number;
  /** Bytes Redis received per iteration, on average over the window. */
  readonly bytesIn: number;
}

export interface TranscriptRun {
  readonly iterations: number;
  readonly totalMs: number;
  readonly windows: readonly TranscriptWindow[];
}

const inputBytes = async (redis: Redis) => Number(/total_net_input_bytes:(\d+)/.exec(await redis.info('stats'))?.[1] ?? Number.NaN);

/** One run of `iterations` calls (one 4 KiB result each), measured over WINDOW iterations from each of `starts`. */
export async function transcriptRun(prefix: string, iterations: number, starts: readonly number[], agent: Agent = reader): Promise<TranscriptRun> {
  const toolName = agent.tools[0]!.name;
  const redis = new Redis(REDIS_URL);
  const arrive: number[] = [];
  const leave: number[] = [];
  const bytes = new Map<number, number>();
  const edges = new Set(starts.flatMap((start) => [start, start + WINDOW]));
  const provider: ModelProvider = {
    id: 'pages',
    defaultModel: 'pages',
    async complete(request): Promise<ProviderResponse> {
      const n = request.messages.filter((message) => message.role === 'tool').length + 1;
      arrive[n] = performance.now();
      if (edges.has(n)) bytes.set(n, await inputBytes(redis));
      const usage = { input: 1, output: 1, total: 2 };
      const response: ProviderResponse =
        n >= iterations
          ? { content: 'done', tool_calls: [], finish_reason: 'stop', usage }
          : { content: null, tool_calls: [{ id: `call_${n}`, type: 'function', function: { name: toolName, arguments: '{}' } }], finish_reason: 'tool_calls', usage };
      leave[n] = performance.now();
      return response;
    },
  };
  const worker = await startWorker({ agents: [agent], provider, redis: REDIS_URL, prefix, logger: silentLogger });
  const client = createClient({ redis: REDIS_URL, prefix });
  try {
    const started = performance.now();
    const { run_id } = await client.enqueue({ agent: agent.name, input: 'read' });
    const record = await client.wait(run_id, { timeout_ms: 30 * 60_000 });
    const totalMs = performance.now() - started;
    if (record.status !== 'completed') throw new Error(`bench run ${run_id} ended ${record.status}`);
    const windows = starts.map((from) => {
      const times: number[] = [];
      for (let n = from; n < from + WINDOW; n += 1) times.push(arrive[n + 1]! - leave[n]!);
      return { from, iterationMs: percentile(times, 50), bytesIn: (bytes.get(from + WINDOW)! - bytes.get(from)!) / WINDOW };
    });
    return { iterations, totalMs, windows };
  } finally {
    await client.close();
    await worker.close();
    await redis.quit();
  }
}

export interface ThreadWindow {
  /** The first run of the window (1-based: the 10th run of the thread is 10). */
  readonly from: number;
  /** Median engine time between a run's two provider calls (ms): its tool round, from the answer to the next call. */
  readonly iterationMs: number;
  /** Median time from a run's enqueue to its first provider call (ms): where the thread's conversation is read. */
  readonly startMs: number;
  /** Bytes Redis received per iteration (each run makes two calls), on average over the window. */
  readonly bytesIn: number;
}

/**
 * `runs` runs one after another on one thread, each of two calls (one 4 KiB tool result, then an
 * answer), so the thread grows by four messages a run; measured over WINDOW runs from each of `starts`.
 */
export async function threadRuns(prefix: string, runs: number, starts: readonly number[]): Promise<ThreadWindow[]> {
  const redis = new Redis(REDIS_URL);
  let current = 0;
  const enqueued: number[] = [];
  const first: number[] = [];
  const answered: number[] = [];
  const second: number[] = [];
  const provider: ModelProvider = {
    id: 'pages',
    defaultModel: 'pages',
    async complete(request): Promise<ProviderResponse> {
      const usage = { input: 1, output: 1, total: 2 };
      if (request.messages.at(-1)?.role === 'tool') {
        second[current] = performance.now();
        return { content: 'done', tool_calls: [], finish_reason: 'stop', usage };
      }
      first[current] = performance.now();
      const response: ProviderResponse = {
        content: null,
        tool_calls: [{ id: `call_${current}`, type: 'function', function: { name: 'bench_page', arguments: '{}' } }],
        finish_reason: 'tool_calls',
        usage,
      };
      answered[current] = performance.now();
      return response;
    },
  };
  const worker = await startWorker({ agents: [reader], provider, redis: REDIS_URL, prefix, logger: silentLogger });
  const client = createClient({ redis: REDIS_URL, prefix });
  const bytes = new Map<number, number>();
  const edges = new Set(starts.flatMap((start) => [start, start + WINDOW]));
  try {
    for (current = 1; current <= runs; current += 1) {
      if (edges.has(current)) bytes.set(current, await inputBytes(redis));
      enqueued[current] = performance.now();
      const { run_id } = await client.enqueue({ agent: reader.name, input: `page ${current}`, thread_id: 'bench-thread' });
      const record = await client.wait(run_id, { timeout_ms: 60_000 });
      if (record.status !== 'completed') throw new Error(`bench run ${run_id} ended ${record.status}`);
    }
    return starts.map((from) => {
      const window = Array.from({ length: WINDOW }, (_, at) => from + at);
      return {
        from,
        iterationMs: percentile(
          window.map((n) => second[n]! - answered[n]!),
          50,
        ),
        startMs: percentile(
          window.map((n) => first[n]! - enqueued[n]!),
          50,
        ),
        bytesIn: (bytes.get(from + WINDOW)! - bytes.get(from)!) / (2 * WINDOW),
      };
    });
  } finally {
    await client.thread('bench-thread').delete();
    await client.close();
    await worker.close();
    await redis.quit();
  }
}
