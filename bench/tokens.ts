import { createToken, silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { startServer } from '@arcflow/server';
import { benchNoop, provider } from './agents.ts';
import { REDIS_URL, percentile } from './lib.ts';

const REQUESTS = 1_000;
const KEY = 'bench-read-key-0123456789';
const SECRET = 'bench-token-secret-0123456789-abcdefgh';

export interface TokenCheckCost {
  /** `GET /v1/runs/{run_id}` p50 with a read key, and with a thread token (signature, claims and the run's thread read). */
  readonly keyP50Ms: number;
  readonly tokenP50Ms: number;
  /** `createToken` p50, in this process (no server). */
  readonly createP50Ms: number;
}

/**
 * What checking an end user's token costs a request (SPEC §19): the same read of a run's record
 * on `arcflow serve`, alternately with an API key and with a token for the run's thread, so that
 * both arms meet the same load.
 */
export async function tokenCheckCost(prefix: string): Promise<TokenCheckCost> {
  const worker = await startWorker({ agents: [benchNoop], provider, redis: REDIS_URL, prefix, logger: silentLogger });
  const server = await startServer({
    redis: REDIS_URL,
    prefix,
    port: 0,
    log: false,
    rate_per_second: 1_000_000,
    keys: [{ name: 'bench', secret: KEY, scope: 'read' }],
    token_secret: SECRET,
  });
  const client = createClient({ redis: REDIS_URL, prefix });
  try {
    const { run_id } = await client.enqueue({ agent: benchNoop.name, input: 'read me', thread_id: 'bench-thread' });
    await client.wait(run_id, { timeout_ms: 30_000 });
    const created: number[] = [];
    let token = '';
    for (let index = 0; index < 200; index += 1) {
      const started = performance.now();
      token = await createToken({ secret: SECRET, thread_id: 'bench-thread', actions: ['read'] });
      created.push(performance.now() - started);
    }
    const read = async (credential: string) => {
      const started = performance.now();
      const response = await fetch(`${server.url}/v1/runs/${run_id}`, { headers: { authorization: `Bearer ${credential}` } });
      if (response.status !== 200) throw new Error(`GET /v1/runs/{run_id} answered ${response.status}`);
      await response.arrayBuffer();
      return performance.now() - started;
    };
    const withKey: number[] = [];
    const withToken: number[] = [];
    for (let index = 0; index < REQUESTS; index += 1) {
      withKey.push(await read(KEY));
      withToken.push(await read(token));
    }
    return { keyP50Ms: percentile(withKey, 50), tokenP50Ms: percentile(withToken, 50), createP50Ms: percentile(created, 50) };
  } finally {
    await client.close();
    await server.close();
    await worker.close();
  }
}
