// A finished run's Redis memory: MEMORY USAGE summed over every key it leaves (its run keys and its
// BullMQ jobs), against its content as JSON (record, events, conversation), for a three-iteration
// run of seven tool calls and a 50-iteration run.
import { Agent, type ModelProvider, silentLogger, tool } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { cleanupPrefix, reply, scriptedProvider, toolCalls } from '@arcflow/testing';
import { Redis } from 'ioredis';
import { REDIS_URL } from './lib.ts';

export interface FinishedRunMemory {
  readonly iterations: number;
  /** MEMORY USAGE summed over the run's keys, BullMQ's job hashes of the run included. */
  readonly bytes: number;
  readonly keys: number;
  /** The run's record, events and conversation as JSON (bytes). */
  readonly contentBytes: number;
  readonly perKey: readonly { readonly key: string; readonly bytes: number }[];
}

const echo = tool({
  name: 'echo',
  description: 'echoes its input',
  input_schema: { type: 'object', properties: { text: { type: 'string' } } },
  handler: (args: { text?: string }) => `echoed: ${args.text ?? ''}`,
});

/** The turns of a run of `iterations` provider calls: rounds of 3, then 4, then 1 call, the last a reply. */
function turns(iterations: number) {
  const rounds = Array.from({ length: iterations - 1 }, (_, round) =>
    toolCalls(Array.from({ length: round === 0 ? 3 : round === 1 ? 4 : 1 }, (_, at) => ({ name: 'echo', args: { text: `round ${round} call ${at}: the weather in a city` } }))),
  );
  return [...rounds, reply('Here is what the tools found: the weather is mild in every city asked about.')];
}

export async function finishedRunMemory(prefix: string, iterations: number): Promise<FinishedRunMemory> {
  const redis = new Redis(REDIS_URL);
  const provider = scriptedProvider(turns(iterations)) as ModelProvider;
  const agent = new Agent({ name: 'memory', tools: [echo], tool_execution: { max_iterations: iterations + 1 } });
  const worker = await startWorker({ agents: [agent], provider, redis: REDIS_URL, prefix, logger: silentLogger });
  const client = createClient({ redis: REDIS_URL, prefix });
  try {
    const { run_id } = await client.enqueue({ agent: 'memory', input: 'What is the weather in the cities I care about?' });
    const run = await client.wait(run_id, { timeout_ms: 60_000 });
    if (run.status !== 'completed') throw new Error(`the memory run ended ${run.status}`);
    // Let the ending process's work after the run's end (its root span, its compaction) finish.
    await worker.close();
    const events = [];
    for await (const event of client.events(run_id)) events.push(event);
    const messages = await client.messages(run_id);
    const contentBytes = Buffer.byteLength(JSON.stringify(run)) + Buffer.byteLength(JSON.stringify(events)) + Buffer.byteLength(JSON.stringify(messages));
    const perKey: { key: string; bytes: number }[] = [];
    for (const key of await scan(redis, `*${prefix}*`)) {
      if (!key.includes(run_id)) continue;
      perKey.push({ key, bytes: Number(await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) });
    }
    const bytes = perKey.reduce((sum, each) => sum + each.bytes, 0);
    return { iterations, bytes, keys: perKey.length, contentBytes, perKey };
  } finally {
    await client.close();
    await worker.close();
    await cleanupPrefix(prefix, REDIS_URL);
    await redis.quit();
  }
}

async function scan(redis: Redis, match: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', match, 'COUNT', 1000);
    found.push(...keys);
    cursor = next;
  } while (cursor !== '0');
  return found.sort();
}

if (process.argv[1]?.endsWith('finished-runs.ts')) {
  for (const iterations of [3, 50]) {
    const memory = await finishedRunMemory(`bench-finished-${process.pid}-${iterations}`, iterations);
    console.log(`${iterations} iterations: ${memory.bytes} B in ${memory.keys} keys, content ${memory.contentBytes} B: ${(memory.bytes / memory.contentBytes).toFixed(2)}x`);
    if (process.env.VERBOSE) for (const each of memory.perKey) console.log(`  ${each.bytes}\t${each.key}`);
  }
}
