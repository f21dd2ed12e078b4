import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, type RunRecord, TERMINAL_STATUSES, TOOL_TERMINAL_KINDS, type TraceEvent } from '@arcflow/core';
import { createClient } from '@arcflow/queue';
import { type WorkerProcess, spawnWorker } from '@arcflow/worker';
import { ensureRedis } from '../demo/redis.ts';
import { readCliEnv } from '../env.ts';
import { formatEvent } from '../format.ts';
import { readCallOrder } from '../call-order.ts';
import { renderInspectTree } from '../inspect.ts';

// The example agent: shipped in this package's `examples/` when installed; the repository's
// `examples/` when run from the sources.
const here = dirname(fileURLToPath(import.meta.url));
const EXAMPLE = [resolve(here, '../../examples/weather-agent.ts'), resolve(here, '../../../../examples/weather-agent.ts')].find((path) => existsSync(path))!;
const CITIES = ['Oslo', 'Lisbon', 'Tokyo', 'Lima'];
const DEMO_PREFIX = 'arcflow-demo';

/**
 * `arcflow demo`: two worker processes, a batch of runs of the example agent and of the example
 * workflow (offline model unless OpenAI settings are set), the first run's events live,
 * progress, then the trees of one agent run and one workflow run, and a summary.
 */
export async function demoCommand(flags: { runs?: string }): Promise<number> {
  const runs = Number(flags.runs ?? 12);
  if (!Number.isInteger(runs) || runs < 1 || runs > 10_000) throw new ConfigError(`--runs must be an integer from 1 to 10000, got ${flags.runs}`);
  const env = readCliEnv();
  const redis = await ensureRedis(env.redis);
  const prefix = env.prefix ?? DEMO_PREFIX;
  const workers: WorkerProcess[] = [];
  const client = createClient({ redis: redis.url, prefix });
  try {
    console.log(
      `arcflow demo — Redis: ${redis.origin}; model: ${env.hasOpenAI ? 'OpenAI-compatible endpoint from the environment' : 'offline scripted model (no API key needed)'}`,
    );
    // A Redis arcflow cannot use (one node of a cluster, an unreadable partition map) is refused here, before any worker starts.
    await client.list({ limit: 1 });
    const workerEnv = { REDIS_URL: redis.url, ARCFLOW_PREFIX: prefix };
    workers.push(...(await Promise.all([spawnWorker(EXAMPLE, { env: workerEnv }), spawnWorker(EXAMPLE, { env: workerEnv })])));
    console.log(`started 2 worker processes: ${workers.map((worker) => `${worker.id} (pid ${worker.pid})`).join(', ')}`);

    const started = Date.now();
    const ids: string[] = [];
    for (let index = 0; index < runs; index += 1) {
      const city = CITIES[index % CITIES.length];
      const { run_id } = await client.enqueue({ agent: 'travel_researcher', input: `Planning a trip to ${city}: weather, local time, and 100 EUR in local money?` });
      ids.push(run_id);
    }
    // The briefing workflow, one run per city: research steps in parallel, a tool step, then the writer.
    const briefings = CITIES.slice(0, Math.min(CITIES.length, runs));
    for (const city of briefings) ids.push((await client.enqueue({ agent: 'city_briefing', input: city })).run_id);
    console.log(`enqueued ${runs} runs of travel_researcher and ${briefings.length} of the city_briefing workflow\n\nevents of ${ids[0]} as they happen:`);
    for await (const event of client.events(ids[0]!, { follow: true })) console.log(formatEvent(event));

    const records = await waitAll(client, ids);
    const elapsedMs = Date.now() - started;
    const events = new Map<string, TraceEvent[]>();
    for (const id of ids) {
      const list: TraceEvent[] = [];
      for await (const event of client.events(id)) list.push(event);
      events.set(id, list);
    }
    for (const index of [0, runs]) {
      const shown = events.get(ids[index]!)!;
      console.log(`\n${renderInspectTree(records[index]!, shown, await readCallOrder({ redis: redis.url, prefix }, ids[index]!, shown))}`);
    }
    console.log('');
    console.log(summary(records, [...events.values()], elapsedMs));
    if (!redis.private) console.log(`\nlook again: ARCFLOW_PREFIX=${prefix} npx arcflow inspect ${ids[0]} (the agent run), ${ids[runs]} (a workflow run)`);
    return records.every((run) => run.status === 'completed') ? 0 : 1;
  } finally {
    await Promise.all(workers.map((worker) => worker.stop()));
    await client.close();
    await redis.stop();
  }
}

async function waitAll(client: ReturnType<typeof createClient>, ids: string[]): Promise<RunRecord[]> {
  let reported = -1;
  for (;;) {
    const records = await Promise.all(ids.map((id) => client.get(id)));
    const done = records.filter((run) => run && TERMINAL_STATUSES.has(run.status)).length;
    if (done !== reported) {
      console.log(`progress: ${done}/${ids.length} runs finished`);
      reported = done;
    }
    if (done === ids.length) return records as RunRecord[];
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

function summary(records: RunRecord[], events: TraceEvent[][], elapsedMs: number): string {
  const latencies = records.map((run) => (run.finished_at ?? 0) - run.created_at).sort((a, b) => a - b);
  const p50 = latencies[Math.floor((latencies.length - 1) / 2)] ?? 0;
  const toolCalls = events.flat().filter((event) => TOOL_TERMINAL_KINDS.has(event.kind)).length;
  const completed = records.filter((run) => run.status === 'completed').length;
  const tokens = records.reduce((sum, run) => sum + run.usage.total, 0);
  return [
    'summary',
    `  runs        ${records.length} (${completed} completed, ${records.length - completed} not; ${records.filter((run) => run.workflow).length} of them workflows)`,
    `  tool calls  ${toolCalls}`,
    `  tokens      ${tokens}`,
    `  p50 run     ${p50} ms`,
    `  throughput  ${((records.length * 1000) / elapsedMs).toFixed(1)} runs/s over ${(elapsedMs / 1000).toFixed(1)} s`,
  ].join('\n');
}
