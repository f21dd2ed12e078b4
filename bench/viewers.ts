// Many viewers of one run on one `arcflow serve` (SPEC §19): serve's memory per SSE client and
// each client's time to its first text chunk at 100, 1,000 and 10,000 clients of one streaming
// run, against a lone client in the same run; and the Redis connections serve holds meanwhile.
// serve is the real command in a process of its own; the clients are raw sockets in another
// (viewer-clients.ts).
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Agent, silentLogger } from '@arcflow/core';
import { openaiProvider } from '@arcflow/provider-openai';
import { createClient, startWorker } from '@arcflow/queue';
import { redisConnectionsOf, startFakeOpenAI } from '@arcflow/testing';
import { ARCFLOW_BIN } from '@arcflow/worker';
import { Redis } from 'ioredis';
import { REDIS_URL, type Row, ms, percentile, rssMiB, sleep } from './lib.ts';

const agent = new Agent({ name: 'bench_viewers', stream: true });
const LONE_RUNS = 15;

export interface ViewersRound {
  readonly clients: number;
  /** serve's resident memory with the clients connected, in MiB. */
  readonly rssMiB: number;
  /** Each client's first text chunk after the model server's first token, ms. */
  readonly firstText: number[];
  /** serve's connections to Redis while the clients were connected. */
  readonly redisConnections: number;
}

/**
 * `arcflow serve` as a process of its own; its URL once it listens. `BENCH_SERVE_BIN`: another
 * checkout's `apps/cli/bin/arcflow.js` (a before/after in the same run); `BENCH_SERVE_NODE_ARGS`:
 * Node flags for it (`--cpu-prof`).
 */
async function spawnServe(prefix: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [...(process.env.BENCH_SERVE_NODE_ARGS?.split(' ') ?? []), process.env.BENCH_SERVE_BIN ?? ARCFLOW_BIN, 'serve', '--port', '0'], {
    env: { ...process.env, REDIS_URL, ARCFLOW_PREFIX: prefix, ARCFLOW_API_RATE: '10000000', ARCFLOW_API_KEYS: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      // Its request log is read and dropped, so that its pipe never fills.
      if (output.length < 10_000) output += chunk.toString();
      const match = /listening on (http:\/\/\S+) /.exec(output);
      if (match) resolve(match[1]!);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`serve exited (${code}):\n${output}`)));
  });
  return { child, url };
}

/**
 * One run streamed to `clients` clients of one serve: the model server holds its answer until
 * every client's stream is open; serve's memory is read then.
 */
async function round(serve: { child: ChildProcess; url: string }, setup: Awaited<ReturnType<typeof viewersSetup>>, clients: number): Promise<ViewersRound> {
  const gate = setup.hold();
  const { run_id } = await setup.client.enqueue({ agent: agent.name, input: `viewers ${clients}` });
  const told = (type: string) =>
    new Promise<{ firsts?: (number | undefined)[] }>((resolve) => {
      const listen = (message: { type: string; firsts?: (number | undefined)[] }) => {
        if (message.type !== type) return;
        setup.clients.off('message', listen);
        resolve(message);
      };
      setup.clients.on('message', listen);
    });
  const open = told('open');
  const done = told('done');
  setup.clients.send({ url: serve.url, run_id, clients });
  await open;
  await sleep(clients > 1 ? 1_000 : 100);
  const rss = rssMiB(serve.child.pid!);
  const redisConnections = await redisConnectionsOf(serve.child.pid!, setup.redis, Number(new URL(REDIS_URL).port || 6379));
  gate.release();
  const { firsts = [] } = await done;
  const firstToken = setup.server.requests.at(-1)?.first_token_at;
  if (firstToken === undefined) throw new Error('the model server sent no token');
  // The model server's clock (performance.now) on the clients' (CLOCK_MONOTONIC, ms).
  const firstTokenAt = Number(process.hrtime.bigint()) / 1e6 - (performance.now() - firstToken);
  const firstText = firsts.filter((at): at is number => at !== undefined).map((at) => at - firstTokenAt);
  if (firstText.length !== clients) throw new Error(`${clients - firstText.length} of ${clients} clients got no text`);
  return { clients, rssMiB: rss, firstText, redisConnections };
}

/** A worker, a client and the fake model server, whose answers wait for `hold().release()`. */
async function viewersSetup(prefix: string) {
  let gate: Promise<void> = Promise.resolve();
  const server = await startFakeOpenAI({
    fallback: async () => {
      await gate;
      return { type: 'text', content: 'A short answer, streamed in small pieces to every viewer at once.', usage: { prompt_tokens: 20, completion_tokens: 16 } };
    },
    stream: { chunk_chars: 4, delay_ms: 2 },
  });
  const provider = openaiProvider({ base_url: server.url, api_key: 'k', timeout_ms: 120_000 });
  const worker = await startWorker({ agents: [agent], provider, redis: REDIS_URL, prefix, logger: silentLogger });
  const client = createClient({ redis: REDIS_URL, prefix });
  const redis = new Redis(REDIS_URL);
  const clients = spawn(process.execPath, ['--import', import.meta.resolve('tsx/esm'), fileURLToPath(new URL('./viewer-clients.ts', import.meta.url))], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await new Promise((resolve) => clients.once('message', resolve));
  return {
    server,
    clients,
    client,
    redis,
    hold: () => {
      let release!: () => void;
      gate = new Promise((resolve) => {
        release = resolve;
      });
      return { release };
    },
    close: async () => {
      await client.close();
      await worker.close();
      await server.close();
      await redis.quit();
      clients.kill('SIGTERM');
    },
  };
}

/** A lone client (over several runs), then 100, 1,000 and 10,000 clients of one run (several runs each), on one serve. */
export async function viewersRounds(prefix: string, counts: readonly number[] = [100, 1_000, 10_000], progress: (message: string) => void = () => undefined) {
  const setup = await viewersSetup(prefix);
  const serve = await spawnServe(prefix);
  try {
    // Warms serve, the worker and the scripts.
    await round(serve, setup, 10);
    const lone: number[] = [];
    let loneRss = 0;
    for (let index = 0; index < LONE_RUNS; index += 1) {
      const one = await round(serve, setup, 1);
      lone.push(...one.firstText);
      loneRss = one.rssMiB;
    }
    const rounds: ViewersRound[] = [];
    for (const clients of counts) {
      // Every client of a run shares that run's own delays (the worker's, Redis's): several runs each.
      const runs = Math.max(2, Math.ceil(1_000 / clients));
      progress(`viewers: ${clients} clients of one run, ${runs} runs`);
      const each: ViewersRound[] = [];
      for (let run = 0; run < runs; run += 1) each.push(await round(serve, setup, clients));
      rounds.push({
        clients,
        // The first run's: later ones add what the earlier runs left for the collector.
        rssMiB: each[0]!.rssMiB,
        firstText: each.flatMap((one) => one.firstText),
        redisConnections: Math.max(...each.map((one) => one.redisConnections)),
      });
    }
    return { lone: { rssMiB: loneRss, firstText: lone }, rounds };
  } finally {
    serve.child.kill('SIGTERM');
    await new Promise((resolve) => serve.child.once('exit', resolve));
    await setup.close();
  }
}

/** The bench's rows: memory per client and first text p50 at each count, against the lone client. */
export async function viewersRows(prefix: string, progress: (message: string) => void): Promise<Row[]> {
  const { lone, rounds } = await viewersRounds(prefix, undefined, progress);
  const loneP50 = percentile(lone.firstText, 50);
  const rows: Row[] = [];
  for (const each of rounds) {
    const perClientKiB = ((each.rssMiB - lone.rssMiB) * 1024) / (each.clients - 1);
    rows.push({
      measure: `serve memory per SSE client, ${each.clients.toLocaleString('en')} clients of one run (RSS ${each.rssMiB.toFixed(0)} MiB in its first run; vs a lone client's)`,
      arcflow: `${perClientKiB.toFixed(1)} KiB`,
      baseline: `${lone.rssMiB.toFixed(0)} MiB`,
      ratio: '-',
      target: '<= 20 KiB',
      verdict: perClientKiB <= 20 ? 'yes' : 'NO',
    });
  }
  for (const each of rounds) {
    const p50 = percentile(each.firstText, 50);
    rows.push({
      measure: `first text chunk after the model's first token, p50 over runs of ${each.clients.toLocaleString('en')} clients (p95 ${ms(percentile(each.firstText, 95))}; vs a lone client, p50 of ${lone.firstText.length} runs)`,
      arcflow: ms(p50),
      baseline: ms(loneP50),
      ratio: `+${ms(p50 - loneP50)}`,
      target: '<= +5 ms p50',
      verdict: p50 - loneP50 <= 5 ? 'yes' : 'NO',
    });
  }
  const most = rounds.at(-1)!;
  rows.push({
    measure: `serve's Redis connections with ${most.clients.toLocaleString('en')} SSE clients (CLIENT LIST)`,
    arcflow: String(most.redisConnections),
    baseline: '-',
    ratio: '-',
    target: '<= 4',
    verdict: most.redisConnections <= 4 ? 'yes' : 'NO',
  });
  return rows;
}
