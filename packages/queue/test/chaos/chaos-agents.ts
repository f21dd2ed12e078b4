// The agent of the chaos run, loaded by real `arcflow worker` processes. Its handlers never fail,
// so any ToolCallFailed is the engine's doing; each checks, as it starts, that its call has no
// recorded result yet (a recorded result must never run again).
import { Agent, type ModelProvider, type ProviderResponse, tool } from 'arcflow';
import { Redis } from 'ioredis';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
redis.on('error', () => undefined);
const prefix = process.env.ARCFLOW_PREFIX ?? 'arcflow';
export const chaosKey = (name: string) => `{${prefix}}:chaos:${name}`;

export const step = tool({
  name: 'chaos_step',
  description: 'waits a moment and answers',
  input_schema: { type: 'object', properties: { n: { type: 'integer' }, delay_ms: { type: 'integer', minimum: 0 } }, required: ['n', 'delay_ms'] },
  handler: async ({ n, delay_ms }: { n: number; delay_ms: number }, ctx) => {
    const results = `{${prefix}}:run:${ctx.run_id}:${ctx.step_id}:results:${ctx.iteration}`;
    if (await redis.hexists(results, ctx.tool_call_id)) await redis.rpush(chaosKey('reruns'), `${ctx.run_id}/${ctx.iteration}/${ctx.tool_call_id}`);
    await redis.incr(chaosKey('executions'));
    await new Promise((resolve) => setTimeout(resolve, delay_ms));
    return `step ${n} done`;
  },
});

export default new Agent({ name: 'chaos_agent', tools: [step], loop_detection: false });

/** Three calls, then two, then text: three iterations per run. */
export const provider: ModelProvider = {
  id: 'chaos',
  defaultModel: 'chaos-model',
  async complete(request): Promise<ProviderResponse> {
    const usage = { input: 5, output: 5, total: 10 };
    const rounds = request.messages.filter((message) => message.role === 'assistant').length;
    if (rounds >= 2) return { content: 'done', tool_calls: [], finish_reason: 'stop', usage };
    const delays = rounds === 0 ? [40, 120, 250] : [80, 200];
    return {
      content: null,
      finish_reason: 'tool_calls',
      usage,
      tool_calls: delays.map((delay_ms, index) => ({
        id: `c${rounds + 1}_${index + 1}`,
        type: 'function',
        function: { name: 'chaos_step', arguments: JSON.stringify({ n: index, delay_ms }) },
      })),
    };
  },
};
