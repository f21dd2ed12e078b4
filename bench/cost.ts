// What SPEC §14's cost reservation costs Redis per provider call: runs of one priced call each,
// with `pricing` and `tenant_budgets` (the call's worst case reserved, then settled: two scripts)
// against the same runs with neither, on a Redis of its own so the CPU and commands are the
// bench's alone. Alternating trials, medians.
import { Agent, type ModelProvider, silentLogger } from '@arcflow/core';
import { type WorkerOptions, createClient, startWorker } from '@arcflow/queue';
import { startPrivateRedis } from '@arcflow/testing';
import { Redis } from 'ioredis';
import { cpuPer, percentile } from './lib.ts';

const RUNS = 400;
const TRIALS = 4;

const provider: ModelProvider = {
  id: 'bench',
  complete: async () => ({ content: 'ok', tool_calls: [], finish_reason: 'stop', usage: { input: 120, output: 8, total: 128 } }),
};
const agent = new Agent({ name: 'priced_bench', instructions: 'Answer.', model: 'bench-m', model_settings: { max_tokens: 64 } });
const COSTED: Partial<WorkerOptions> = {
  pricing: { 'bench-m': { input_per_mtok: 1, output_per_mtok: 4 } },
  tenant_budgets: { '*': { max_cost_usd_per_day: 1_000_000 } },
};

export interface ReservationCost {
  /** Redis CPU (µs) and commands per call, with the reservation and without. */
  readonly costed: { readonly cpu: number; readonly commands: number };
  readonly plain: { readonly cpu: number; readonly commands: number };
}

/** One trial: RUNS runs of ten tenants through a fresh in-process worker; Redis CPU and commands per run (one call each). */
async function trial(url: string, prefix: string, options: Partial<WorkerOptions>) {
  const worker = await startWorker({ agents: [agent], provider, redis: url, prefix, logger: silentLogger, concurrency: { provider: 32, tools: 8 }, ...options });
  const client = createClient({ redis: url, prefix });
  const probe = new Redis(url);
  try {
    const measured = await cpuPer(probe, [], RUNS, async () => {
      const runs = await Promise.all(Array.from({ length: RUNS }, (_, i) => client.enqueue({ agent: agent.name, input: `q${i}`, tenant: `t${i % 10}` })));
      for (const { run_id } of runs) await client.wait(run_id, { timeout_ms: 60_000 });
    });
    return { cpu: measured.cpu.redis * 1000, commands: measured.commands.all };
  } finally {
    await client.close();
    await worker.close();
    await probe.quit();
  }
}

export async function reservationCost(prefix: string): Promise<ReservationCost> {
  const server = await startPrivateRedis();
  const arms = { plain: { options: {}, cpu: [] as number[], commands: [] as number[] }, costed: { options: COSTED, cpu: [] as number[], commands: [] as number[] } };
  try {
    for (let n = 0; n <= TRIALS; n += 1) {
      for (const [name, arm] of Object.entries(arms)) {
        const measured = await trial(server.url, `${prefix}-${name}-${n}`, arm.options);
        if (n === 0) continue; // warm-up
        arm.cpu.push(measured.cpu);
        arm.commands.push(measured.commands);
      }
    }
  } finally {
    await server.close();
  }
  const median = (values: number[]) => percentile(values, 50);
  return {
    costed: { cpu: median(arms.costed.cpu), commands: median(arms.costed.commands) },
    plain: { cpu: median(arms.plain.cpu), commands: median(arms.plain.commands) },
  };
}
