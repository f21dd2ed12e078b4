// Agents for the benchmarks. The model is instant and scripted by the input text:
// "iterations=N" asks for N rounds of one no-op call; "fan=K" asks for one round of K calls.
import { Agent, type ModelProvider, type ProviderResponse, tool } from 'arcflow';
import { Redis } from 'ioredis';

let redis: Redis | undefined;
const benchKey = (name: string) => `{${process.env.ARCFLOW_PREFIX}}:bench:${name}`;

export const noop = tool({ name: 'noop', description: 'does nothing', input_schema: { type: 'object' }, handler: () => 'ok' });

export const nap = tool({
  name: 'nap',
  description: 'takes 250 ms',
  input_schema: { type: 'object' },
  handler: () => new Promise((resolve) => setTimeout(() => resolve('rested'), 250)),
});

/** Holds for a minute (or until its run is cancelled): a run that waits without touching Redis. */
export const hold = tool({
  name: 'hold',
  description: 'waits a minute',
  input_schema: { type: 'object' },
  timeout_ms: 120_000,
  handler: (_args, ctx) =>
    new Promise((resolve) => {
      const timer = setTimeout(() => resolve('held'), 60_000);
      ctx.signal.addEventListener('abort', () => (clearTimeout(timer), resolve('released')));
    }),
});

/** Blocks on its first execution; records when each execution started. */
export const stuck = tool({
  name: 'stuck',
  description: 'blocks the first time',
  input_schema: { type: 'object' },
  timeout_ms: 120_000,
  handler: async () => {
    redis ??= new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    const execution = await redis.rpush(benchKey('stuck'), `${Date.now()}:${process.pid}`);
    if (execution === 1) await new Promise(() => undefined);
    return 'unstuck';
  },
});

/** Records when and where each execution started, then takes a second. */
export const rest = tool({
  name: 'rest',
  description: 'takes a second',
  input_schema: { type: 'object' },
  timeout_ms: 30_000,
  handler: async () => {
    redis ??= new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    await redis.rpush(benchKey('rest'), `${Date.now()}:${process.pid}`);
    await new Promise((resolve) => setTimeout(resolve, REST_MS));
    return 'rested';
  },
});
export const REST_MS = 1_000;

const off = { loop_detection: false as const, tool_execution: { max_iterations: 1000 } };
export const benchNoop = new Agent({ name: 'bench_noop', tools: [noop], ...off });
export const benchNap = new Agent({ name: 'bench_nap', tools: [nap], ...off });
export const benchStuck = new Agent({ name: 'bench_stuck', tools: [stuck], ...off });
export const benchHold = new Agent({ name: 'bench_hold', tools: [hold], ...off });
export const benchRest = new Agent({ name: 'bench_rest', tools: [rest], ...off });

export default [benchNoop, benchNap, benchStuck, benchRest];

/** The instant model. */
export const provider: ModelProvider = {
  id: 'instant',
  defaultModel: 'instant',
  async complete(request): Promise<ProviderResponse> {
    const usage = { input: 1, output: 1, total: 2 };
    const input = String(request.messages.find((message) => message.role === 'user')?.content ?? '');
    const rounds = request.messages.filter((message) => message.role === 'assistant').length;
    const iterations = Number(/iterations=(\d+)/.exec(input)?.[1] ?? 1);
    const fan = Number(/fan=(\d+)/.exec(input)?.[1] ?? 1);
    if (rounds >= iterations) return { content: 'done', tool_calls: [], finish_reason: 'stop', usage };
    const name = request.tools[0]?.name ?? 'noop';
    return {
      content: null,
      finish_reason: 'tool_calls',
      usage,
      tool_calls: Array.from({ length: fan }, (_, index) => ({
        id: `c${rounds}_${index}`,
        type: 'function' as const,
        function: { name, arguments: JSON.stringify({ round: rounds, index }) },
      })),
    };
  },
};
