// The cost of a child run (SPEC §13): a run whose one tool call is an agent tool, whose child
// answers at once, against the same run whose call is a plain tool returning the same text. One
// in-process worker, an instant model; the two alternate in batches.
import { Agent, type ModelProvider, agentTool, silentLogger, tool } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { REDIS_URL, type Row, ms, percentile } from './lib.ts';

const BATCHES = 6;
const RUNS_PER_BATCH = 25;

const helper = new Agent({ name: 'bench-helper', instructions: 'helper' });
const withChild = new Agent({ name: 'bench-with-child', tools: [agentTool(helper, { name: 'ask' })] });
const withTool = new Agent({ name: 'bench-with-tool', tools: [tool({ name: 'look', description: 'd', input_schema: { type: 'object' }, handler: () => 'answered' })] });

/** Asks its one tool once, then answers; the helper answers at once. */
const model: ModelProvider = {
  id: 'instant',
  defaultModel: 'instant',
  async complete(request) {
    const usage = { input: 1, output: 1, total: 2 };
    const name = request.tools[0]?.name;
    if (!name || request.messages.at(-1)?.role === 'tool') return { content: 'answered', tool_calls: [], finish_reason: 'stop', usage };
    return {
      content: null,
      finish_reason: 'tool_calls',
      usage,
      tool_calls: [{ id: 'c1', type: 'function', function: { name, arguments: JSON.stringify(name === 'ask' ? { input: 'q' } : {}) } }],
    };
  },
};

/** Run time p50 (enqueue to completed), with a child call and with a plain tool call. */
export async function childRunRows(prefix: string): Promise<Row[]> {
  const worker = await startWorker({ agents: [withChild, withTool], provider: model, redis: REDIS_URL, prefix, logger: silentLogger });
  const client = createClient({ redis: REDIS_URL, prefix });
  const times = { child: [] as number[], tool: [] as number[] };
  const batch = async (agent: Agent, into: number[]) => {
    for (let run = 0; run < RUNS_PER_BATCH; run += 1) {
      const started = performance.now();
      const { run_id } = await client.enqueue({ agent: agent.name, input: 'q' });
      const record = await client.wait(run_id, { timeout_ms: 30_000 });
      if (record.status !== 'completed') throw new Error(`bench run ${run_id} ended ${record.status}`);
      into.push(performance.now() - started);
    }
  };
  try {
    await batch(withChild, []);
    await batch(withTool, []);
    for (let round = 0; round < BATCHES; round += 1) {
      await batch(withChild, times.child);
      await batch(withTool, times.tool);
    }
  } finally {
    await client.close();
    await worker.close();
  }
  const child = percentile(times.child, 50);
  const plain = percentile(times.tool, 50);
  return [
    {
      measure: 'run p50, one agent-tool call whose child answers at once (vs a plain tool)',
      arcflow: ms(child),
      baseline: ms(plain),
      ratio: `+${ms(child - plain)}`,
      target: 'info',
      verdict: '-',
    },
  ];
}
