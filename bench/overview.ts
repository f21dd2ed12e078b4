import { silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { startServer } from '@arcflow/server';
import { benchNoop, provider } from './agents.ts';
import { REDIS_URL, percentile } from './lib.ts';

const RUNS = 2_000;
const READS = 15;

export interface OverviewCost {
  readonly runs: number;
  /** `GET /v1/overview?window=hour`, p50 over READS reads. */
  readonly overviewMs: number;
  /** The same records read through the runs listing, `GET /v1/runs?limit=500` page after page (p50 of the whole read). */
  readonly listMs: number;
}

/**
 * The console overview's cost (docs/decisions/0027-console-overview.md): an hour's overview over
 * RUNS ended runs, which reads all their records, against reading as many records through the
 * runs listing in the same run.
 */
export async function overviewCost(prefix: string): Promise<OverviewCost> {
  const worker = await startWorker({ agents: [benchNoop], provider, redis: REDIS_URL, prefix, logger: silentLogger });
  const server = await startServer({ redis: REDIS_URL, prefix, port: 0, log: false, rate_per_second: 1_000_000 });
  const client = createClient({ redis: REDIS_URL, prefix });
  try {
    const ids: string[] = [];
    for (let at = 0; at < RUNS; at += 100) {
      ids.push(...(await Promise.all(Array.from({ length: 100 }, (_, n) => client.enqueue({ agent: benchNoop.name, input: `overview ${at + n}` })))).map((run) => run.run_id));
    }
    await Promise.all(ids.map((run_id) => client.wait(run_id, { timeout_ms: 120_000 })));
    const time = async (read: () => Promise<unknown>) => {
      const times: number[] = [];
      for (let at = 0; at < READS; at += 1) {
        const started = performance.now();
        await read();
        times.push(performance.now() - started);
      }
      return percentile(times, 50);
    };
    const get = async (path: string) => {
      const response = await fetch(`${server.url}${path}`);
      if (response.status !== 200) throw new Error(`${path} answered ${response.status}`);
      return response.json() as Promise<{ runs_read?: number; next_cursor?: string }>;
    };
    const overviewMs = await time(async () => {
      const body = await get('/v1/overview?window=hour');
      if (body.runs_read !== RUNS) throw new Error(`the overview read ${body.runs_read} runs, not ${RUNS}`);
    });
    const listMs = await time(async () => {
      let cursor = '';
      for (let page = 0; page < RUNS / 500; page += 1) cursor = (await get(`/v1/runs?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)).next_cursor ?? '';
    });
    return { runs: RUNS, overviewMs, listMs };
  } finally {
    await client.close();
    await server.close();
    await worker.close();
  }
}
